// The extender's direct reading and writing (read_extender_args_fast, filter_result_text, priorities_text)
// against the trees they replace: for every body the fast reader answers, nlohmann's parser +
// parse_extender_args give the same ExtenderArgs; every answer's text is byte for byte nlohmann's dump() of
// the tree. The hand cases' expectations come from the protocol (Go field names, any letter case, an exact
// match first; a repeated key's last value, as nlohmann and Go's decoder keep).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ascend/common/json_depth.h"
#include "ascend/scheduler/wire.h"

namespace ascend::scheduler {
namespace {

using nlohmann::json;

std::string describe(const PodInfo& p) {
  std::string s = p.ns + "|" + p.name + "|" + p.uid + "|" + p.resource + "|" + std::to_string(p.chips) + "|" +
                  p.vnpu_resource + "|" + std::to_string(p.index) + "|" + p.job_error;
  if (p.job) {
    const auto& j = *p.job;
    s += "|job " + j.name + " " + std::to_string(j.pods) + " " + std::to_string(j.tp) + " " +
         std::to_string(j.pp) + " " + std::to_string(j.dp) + " " + std::to_string(static_cast<int>(j.order)) +
         " " + std::to_string(j.comm.tp) + " " + std::to_string(j.comm.pp) + " " + std::to_string(j.comm.dp) +
         " " + j.recovery + " " + std::to_string(j.max_restarts);
  }
  return s;
}

// The long way, as the server takes it when the fast reader declines.
std::optional<ExtenderArgs> long_way(const std::string& text, std::size_t max_nodes) {
  json body = json::parse(text, nullptr, false);
  if (body.is_discarded()) return std::nullopt;
  auto a = parse_extender_args(body, max_nodes);
  if (!a.ok()) return std::nullopt;
  return std::move(*a);
}

// When the fast reader answers, the long way answers the same.
void expect_agrees(const std::string& text, std::size_t max_nodes = 1000) {
  auto fast = read_extender_args_fast(text, max_nodes);
  if (!fast) return;
  auto slow = long_way(text, max_nodes);
  ASSERT_TRUE(slow.has_value()) << "the fast reader took a body the long way refuses: " << text;
  EXPECT_EQ(describe(fast->pod), describe(slow->pod)) << text;
  EXPECT_EQ(fast->node_names, slow->node_names) << text;
  EXPECT_EQ(fast->full_nodes, slow->full_nodes) << text;
}

const char* const kPod =
    R"({"metadata":{"name":"p-3","namespace":"ml","uid":"0b6e-11","annotations":{"ascend.huawei.com/job":"train",)"
    R"("ascend.huawei.com/job-pods":"4","ascend.huawei.com/parallel":"tp=8,dp=4"}},)"
    R"("spec":{"terminationGracePeriodSeconds":30,"priority":-5,"containers":[{"name":"m","resources":)"
    R"({"limits":{"huawei.com/Ascend910":"8"},"requests":{"huawei.com/Ascend910":8}}}]}})";

TEST(ExtenderReadFast, ReadsWhatKubeSchedulerSends) {
  std::string body = std::string(R"({"Pod":)") + kPod + R"(,"NodeNames":["node-0","node-1.rack-2"]})";
  auto a = read_extender_args_fast(body, 10);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->node_names, (std::vector<std::string>{"node-0", "node-1.rack-2"}));
  EXPECT_FALSE(a->full_nodes);
  EXPECT_EQ(a->pod.ns, "ml");
  EXPECT_EQ(a->pod.name, "p-3");
  EXPECT_EQ(a->pod.chips, 8);
  ASSERT_TRUE(a->pod.job.has_value());
  EXPECT_EQ(a->pod.job->name, "train");
  EXPECT_EQ(a->pod.job->tp, 8);
  EXPECT_EQ(a->pod.index, 3);
  expect_agrees(body);
}

TEST(ExtenderReadFast, FieldNamesInAnyCaseAnExactMatchFirstTheLastOfARepeatedKey) {
  std::string pod = kPod;
  auto names = [&](const std::string& body) {
    auto a = read_extender_args_fast(body, 10);
    expect_agrees(body);
    return a ? a->node_names : std::vector<std::string>{"(declined)"};
  };
  EXPECT_EQ(names(R"({"pod":)" + pod + R"(,"nodenames":["a"]})"), std::vector<std::string>{"a"});
  EXPECT_EQ(names(R"({"POD":)" + pod + R"(,"NODENAMES":["a"]})"), std::vector<std::string>{"a"});
  EXPECT_EQ(names(R"({"Pod":)" + pod + R"(,"NodeNames":["a"],"NodeNames":["b"]})"),
            std::vector<std::string>{"b"});
  EXPECT_EQ(names(R"({"Pod":)" + pod + R"(,"NodeNames":["b"],"nodenames":["a"]})"),
            std::vector<std::string>{"b"});
  EXPECT_EQ(names(R"({"Pod":)" + pod + R"(,"nodenames":["a"],"NodeNames":["b"]})"),
            std::vector<std::string>{"b"});
  EXPECT_EQ(names(R"({"Pod":)" + pod + R"(,"NodeNames":[],"Nodes":null,"Other":[1,{"x":2.5}]})"),
            std::vector<std::string>{});
}

TEST(ExtenderReadFast, LeavesEveryErrorAndOddityToTheLongWay) {
  const std::string pod = kPod;
  const std::vector<std::string> declined = {
      "",
      "[]",
      R"({"Pod":)" + pod + R"(,"NodeNames":["a"])",                        // cut short
      R"({"Pod":)" + pod + R"(,"NodeNames":["a"]} x)",                     // trailing text
      R"({"Pod":)" + pod + R"(,"NodeNames":["a","Bad_Name"]})",            // not a DNS-1123 name
      R"({"Pod":)" + pod + R"(,"NodeNames":["a",7]})",                     // not a string
      R"({"Pod":)" + pod + R"(,"NodeNames":"a"})",                         // not an array
      R"({"Pod":)" + pod + R"(,"NodeNames":null})",                        // no nodes at all
      R"({"Pod":)" + pod + R"(})",                                         // no nodes at all
      R"({"NodeNames":["a"]})",                                            // no pod
      R"({"Pod":null,"NodeNames":["a"]})",                                 // no pod
      R"({"Pod":{"metadata":{}},"NodeNames":["a"]})",                      // a pod without a name
      R"({"Pod":)" + pod + R"(,"Nodes":{"items":[]},"NodeNames":["a"]})",  // full Node objects
      "{\"Pod\":" + pod + ",\"NodeNames\":[\"a\xff\"]}",                   // not UTF-8
  };
  for (const auto& body : declined) {
    EXPECT_FALSE(read_extender_args_fast(body, 10).has_value()) << body;
  }
  // A fraction in the pod is read as nlohmann reads it (the Pod is its text parsed by nlohmann).
  const std::string fraction = R"({"Pod":{"metadata":{"name":"p"},"x":1.5},"NodeNames":["a"]})";
  EXPECT_TRUE(read_extender_args_fast(fraction, 10).has_value());
  expect_agrees(fraction);
  // An empty view whose data() is null (a request with no body line): declined before any copy.
  EXPECT_FALSE(read_extender_args_fast(std::string_view(), 10).has_value());
  // simdjson reads -0 as the integer 0 (nlohmann: a signed 0): the same count to the pod's reader.
  expect_agrees(R"({"Pod":{"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"limits":)"
                R"({"huawei.com/Ascend910":-0}}}]}},"NodeNames":["a"]})");
  // More names than the cluster has: declined, and the long way says so.
  std::string three = R"({"Pod":)" + pod + R"(,"NodeNames":["a","b","c"]})";
  EXPECT_FALSE(read_extender_args_fast(three, 2).has_value());
  EXPECT_TRUE(read_extender_args_fast(three, 3).has_value());
}

// kube-scheduler sends every pod's /filter the same names: a NodeNames array of the same bytes as one read
// before shares that one's list (it was checked then); any other array is read and checked anew, whatever
// the arrays read before it were.
TEST(ExtenderReadFast, TheSameNamesBytesShareTheListAndEveryOtherListIsCheckedAnew) {
  const std::string solo = R"({"metadata":{"name":"solo"}})";
  auto body = [](const std::string& pod, const std::string& list) {
    return R"({"Pod":)" + pod + R"(,"NodeNames":)" + list + "}";
  };
  using Names = std::vector<std::string>;
  const std::string three = R"(["n-1","n-2","n-3"])";
  auto a = read_extender_args_fast(body(kPod, three), 10);
  ASSERT_TRUE(a.has_value());
  auto b = read_extender_args_fast(body(solo, three), 10);  // another pod, the same names
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->node_names, (Names{"n-1", "n-2", "n-3"}));
  EXPECT_EQ(b->node_names.view().data(), a->node_names.view().data()) << "the list is shared";
  EXPECT_EQ(b->pod.name, "solo");
  // One name changed to one that is not a DNS-1123 subdomain: read anew, declined (the long way refuses).
  for (std::string list : {R"(["n-1","N-2","n-3"])", R"(["n-1","n-2","n-3","n_4"])", R"(["n-1","bad_"])",
                           R"(["n-1","n-2",3])", R"(["n-1","n-\u0032"])"}) {
    EXPECT_FALSE(read_extender_args_fast(body(kPod, list), 10).has_value()) << list;
    expect_agrees(body(kPod, list), 10);
  }
  // The names that passed, in order (kube-scheduler's /prioritize); out of order; spaced otherwise; each
  // its own list.
  const std::vector<std::pair<std::string, Names>> lists = {
      {R"(["n-1","n-3"])", {"n-1", "n-3"}},
      {R"(["n-3","n-1","m"])", {"n-3", "n-1", "m"}},
      {R"([ "n-1" ,"n-2",  "n-3"  ])", {"n-1", "n-2", "n-3"}},
      {"[]", {}},
  };
  for (const auto& [list, names] : lists) {
    auto c = read_extender_args_fast(body(kPod, list), 10);
    ASSERT_TRUE(c.has_value()) << list;
    EXPECT_EQ(c->node_names, names) << list;
    expect_agrees(body(kPod, list), 10);
  }
  // The first bytes again, after other lists: the same names; with fewer nodes allowed than it has,
  // declined (the long way says how many).
  auto d = read_extender_args_fast(body(solo, three), 10);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->node_names, (Names{"n-1", "n-2", "n-3"}));
  EXPECT_FALSE(read_extender_args_fast(body(solo, three), 2).has_value());
  EXPECT_FALSE(long_way(body(solo, three), 2).has_value());
  // A list outlives the reader's memory of it: every copy keeps its names.
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(read_extender_args_fast(body(solo, "[\"x-" + std::to_string(i) + "\"]"), 10).has_value());
  }
  EXPECT_EQ(a->node_names, (Names{"n-1", "n-2", "n-3"}));
}

// A list read before is looked for where it was and just before the closing brace (kube-scheduler's
// encoder writes Pod, Nodes, NodeNames in that order), and the text then read with "[]" in its place: taken
// only when that "[]" is NodeNames' value. Its bytes as another member's value, inside the Pod, or under a
// NodeNames that a later repeat of the key overrides are not the names.
TEST(ExtenderReadFast, AListReadBeforeIsTheNamesOnlyWhereItIsNodeNamesValue) {
  using Names = std::vector<std::string>;
  const std::string list = R"(["n-1","n-2","n-3"])";
  const Names three = {"n-1", "n-2", "n-3"};
  const std::string solo = R"({"metadata":{"name":"solo"}})";
  // Read once: NodeNames first, its list 13 bytes in.
  auto first = read_extender_args_fast(R"({"NodeNames":)" + list + R"(,"Pod":)" + kPod + "}", 10);
  ASSERT_TRUE(first.has_value());
  struct Case {
    std::string body;
    Names names;
  };
  const std::vector<Case> cases = {
      // As kube-scheduler sends it, another pod (the list elsewhere than before), a newline after it.
      {R"({"Pod":)" + solo + R"(,"Nodes":null,"NodeNames":)" + list + "}\n", three},
      // Where it was first (13 bytes in) but as another member's value.
      {R"({"NodeNamez":)" + list + R"(,"Pod":)" + solo + R"(,"NodeNames":["x-1"]})", {"x-1"}},
      // Just before the closing brace, as another member's value.
      {R"({"Pod":)" + solo + R"(,"NodeNames":["x-2"],"Other":)" + list + "}", {"x-2"}},
      // 13 bytes in, inside the Pod.
      {R"({"Pod":{"ab":)" + list + R"(,"metadata":{"name":"p"}},"NodeNames":["x-3"]})", {"x-3"}},
      // Under a NodeNames that a repeat of the key overrides, and the other way round.
      {R"({"NodeNames":)" + list + R"(,"Pod":)" + solo + R"(,"NodeNames":["x-4"]})", {"x-4"}},
      {R"({"NodeNames":["x-5"],"Pod":)" + solo + R"(,"NodeNames":)" + list + "}", three},
      // Before the closing brace with a space between: read as it is, the same names.
      {R"({"Pod":)" + solo + R"(,"NodeNames":)" + list + " }", three},
      // Where it was, a body that is not JSON after it.
      {R"({"NodeNames":)" + list + R"(,"Pod":)" + solo + ",}", {}},
  };
  for (const auto& c : cases) {
    auto a = read_extender_args_fast(c.body, 10);
    if (c.names.empty()) {
      EXPECT_FALSE(a.has_value()) << c.body;
      EXPECT_FALSE(long_way(c.body, 10).has_value()) << c.body;
      continue;
    }
    ASSERT_TRUE(a.has_value()) << c.body;
    EXPECT_EQ(a->node_names, c.names) << c.body;
    expect_agrees(c.body, 10);
    // The first list read again, where it was, between the cases: it must not be confused with them.
    auto again = read_extender_args_fast(R"({"NodeNames":)" + list + R"(,"Pod":)" + kPod + "}", 10);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->node_names, three);
  }
  // The list where it was, with fewer nodes allowed than it has: declined, as the long way refuses it.
  const std::string body = R"({"Pod":)" + solo + R"(,"NodeNames":)" + list + "}";
  EXPECT_FALSE(read_extender_args_fast(body, 2).has_value());
  EXPECT_FALSE(long_way(body, 2).has_value());
  auto taken = read_extender_args_fast(body, 3);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->node_names.view().data(), first->node_names.view().data()) << "the list is shared";
}

// Random bodies from realistic and odd parts: whenever the fast reader answers, the long way answers the
// same; both ways often enough that the comparison means something.
TEST(ExtenderReadFast, RandomBodiesNeverDisagreeWithTheLongWay) {
  const std::vector<std::string> keys = {"Pod",   "pod",   "POD",   "NodeNames", "nodenames", "nodeNames",
                                         "Nodes", "nodes", "Other", "Pod ",      "NodeNames"};
  const std::vector<std::string> pods = {
      kPod,
      R"({"metadata":{"name":"solo"},"spec":{"containers":[{"resources":{"limits":{"huawei.com/Ascend910":"4"}}}]}})",
      R"({"metadata":{"name":"v","namespace":"a"},"spec":{"containers":[{"resources":{"limits":{"huawei.com/Ascend910-2c":"1"}}}]}})",
      R"({"metadata":{"name":"n","labels":{"k":"v"},"generation":18446744073709551615}})",
      R"({"metadata":{"name":"n","generation":18446744073709551616}})",
      R"({"metadata":{"name":"n","x":[true,false,null,-1,0,1e2]}})",
      R"({"metadata":{"name":"\u0070od"}})",
      R"({"metadata":{"name":"p","name":"q"}})",
      R"({"metadata":{"name":"UPPER"}})",
      R"({"metadata":{"name":"p"},"spec":{"containers":[{"resources":{"limits":{"huawei.com/Ascend910":"x"}}}]}})",
      "null",
      "[]",
      "\"pod\"",
  };
  const std::vector<std::string> names = {"node-0", "a.b", "n-1", "x", "Bad", "-n", "n-", "a..b", "é", ""};
  const std::vector<std::string> values = {"[]", "null", "\"a\"", "{}", "[1]", "[\"a\",null]"};
  std::mt19937 rng(31);
  auto pick = [&](const std::vector<std::string>& v) -> const std::string& { return v[rng() % v.size()]; };
  int taken = 0;
  int declined = 0;
  auto name_list = [&] {
    std::string list = "[";
    int n = static_cast<int>(rng() % 5);
    for (int k = 0; k < n; ++k) {
      if (k > 0) list += ",";
      // Mostly good names: a list is taken only when all its names are.
      list += "\"" + (rng() % 8 == 0 ? pick(names) : names[rng() % 4]) + "\"";
    }
    return list + "]";
  };
  for (int i = 0; i < 6000; ++i) {
    // A pod and a name list under some spelling of their keys, and up to two more members of any kind, in
    // any order.
    std::vector<std::string> members = {"\"" + keys[rng() % 3] + "\":" + pick(pods),
                                        "\"" + keys[3 + rng() % 3] + "\":" + name_list()};
    for (int m = 0, extra = static_cast<int>(rng() % 3); m < extra; ++m) {
      std::string member = "\"" + pick(keys) + "\":";
      switch (rng() % 3) {
        case 0:
          member += pick(pods);
          break;
        case 1:
          member += name_list();
          break;
        default:
          member += pick(values);
      }
      members.push_back(member);
    }
    std::shuffle(members.begin(), members.end(), rng);
    std::string body = "{";
    for (std::size_t m = 0; m < members.size(); ++m) body += (m > 0 ? "," : "") + members[m];
    body += "}";
    if (rng() % 10 == 0) body.insert(rng() % body.size(), 1, "{}[],:\" x"[rng() % 9]);  // a stray character
    if (read_extender_args_fast(body, 3)) {
      ++taken;
    } else {
      ++declined;
    }
    expect_agrees(body, 3);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(taken, 200);
  EXPECT_GT(declined, 200);
}

// ---- answers ----

std::string odd(std::mt19937& rng) {
  const std::vector<std::string> parts = {"node-1", "a\"b",        "back\\slash", "tab\there", "nl\n", "\x01",
                                          "é",      "日本",        "/",           "~",         " ",    "\x7f",
                                          "",       "node-0123456"};
  std::string s;
  int n = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < n; ++i) s += parts[rng() % parts.size()];
  return s;
}

// The fast reader refuses deep nesting itself (the server no longer scans the text for it first): nothing the
// long way refuses as too deep (the server's 128) is read here, and an ordinary Pod is.
TEST(ExtenderReadFast, LeavesDeepNestingToTheLongWay) {
  auto body = [](int depth) {  // the body, the Pod and its spec are 3; the rest is arrays in the spec
    std::string open(static_cast<std::size_t>(depth - 3), '['), close(open.size(), ']');
    return R"({"Pod":{"metadata":{"name":"p"},"spec":{"x":)" + open + close + R"(}},"NodeNames":["n-1"]})";
  };
  for (int depth = 4; depth <= 300; ++depth) {
    std::string text = body(depth);
    ASSERT_EQ(ascend::json_nests_deeper_than(text, depth), false);
    ASSERT_EQ(ascend::json_nests_deeper_than(text, depth - 1), true);
    auto fast = read_extender_args_fast(text);
    if (depth <= 60) {
      EXPECT_TRUE(fast.has_value()) << depth;
    }
    if (depth > 64) {
      EXPECT_FALSE(fast.has_value()) << depth;
    }
  }
}

// The one-pass check of a node name (and check_dns1123_subdomain, which asks it) against Kubernetes' own
// definition, apimachinery's validation regex for a DNS-1123 subdomain
// ([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*, at most 253 characters), on every short
// string of a few telling characters and on random longer ones.
TEST(ExtenderReadFast, NameCheckIsKubernetesDns1123Subdomain) {
  const std::regex k8s("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
  const auto spec = [&](const std::string& v, std::size_t max) {
    return v.size() <= max && std::regex_match(v, k8s);
  };
  const std::string chars = "a0-.Z_";
  for (int len = 0; len <= 5; ++len) {
    std::size_t count = 1;
    for (int i = 0; i < len; ++i) count *= chars.size();
    for (std::size_t k = 0; k < count; ++k) {
      std::string v;
      for (std::size_t x = k; static_cast<int>(v.size()) < len; x /= chars.size())
        v += chars[x % chars.size()];
      ASSERT_EQ(is_dns1123_subdomain(v), spec(v, 253)) << "'" << v << "'";
      ASSERT_EQ(is_dns1123_subdomain(v, 3), spec(v, 3)) << "'" << v << "'";
      ASSERT_EQ(check_dns1123_subdomain(v, "f").ok(), spec(v, 253)) << "'" << v << "'";
    }
  }
  std::mt19937 rng(5);
  const std::string more = "abz09-.-.A\xff";
  for (int i = 0; i < 20000; ++i) {
    std::string v;
    for (int n = static_cast<int>(rng() % 300); n > 0; --n) v += more[rng() % more.size()];
    ASSERT_EQ(is_dns1123_subdomain(v), spec(v, 253)) << "'" << v << "'";
  }
  EXPECT_TRUE(is_dns1123_subdomain(std::string(253, 'a')));
  EXPECT_FALSE(is_dns1123_subdomain(std::string(254, 'a')));
}

TEST(ExtenderAnswerText, IsByteForByteTheTreesDump) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    ExtenderArgs args;
    FilterResult r;
    std::vector<NodeScore> scores;
    int n = static_cast<int>(rng() % 6);
    std::string shared = odd(rng);
    for (int k = 0; k < n; ++k) {
      r.passed.push_back(odd(rng));
      r.failed.set(odd(rng), rng() % 2 ? shared : odd(rng));
      r.unresolvable.set(odd(rng), rng() % 2 ? shared : odd(rng));
      scores.push_back({odd(rng), static_cast<int>(rng() % 21) - 10});
    }
    ASSERT_EQ(filter_result_text(args, r), filter_result_json(args, r).dump());
    ASSERT_EQ(priorities_text(scores), priorities_json(scores).dump());
    // The server's form: the request's names and Scheduler::scores apart (the names all plain or not).
    std::vector<std::string> hosts;
    std::vector<int> each;
    for (const auto& sc : scores) {
      hosts.push_back(sc.host);
      each.push_back(sc.score);
    }
    ASSERT_EQ(priorities_text(NodeNameList(hosts), each), priorities_json(scores).dump());
  }
  // The answer kube-scheduler reads, written out by hand from k8s.io/kube-scheduler/extender/v1's field
  // names.
  ExtenderArgs args;
  FilterResult r;
  r.passed = {"n-1"};
  r.failed = {{"n-2", "2 of 8 chips free"}};
  r.unresolvable = {{"n-3", "x"}};
  EXPECT_EQ(
      filter_result_text(args, r),
      R"({"Error":"","FailedAndUnresolvableNodes":{"n-3":"x"},"FailedNodes":{"n-2":"2 of 8 chips free"},)"
      R"("NodeNames":["n-1"],"Nodes":null})");
  EXPECT_EQ(priorities_text({{"n-1", 10}, {"n-2", 0}}),
            R"([{"Host":"n-1","Score":10},{"Host":"n-2","Score":0}])");
  EXPECT_EQ(priorities_text({}), "[]");
  const NodeNameList hosts = {"n-1", "n-2"};
  const std::vector<int> each = {10, 0};
  EXPECT_EQ(priorities_text(hosts, each), R"([{"Host":"n-1","Score":10},{"Host":"n-2","Score":0}])");
  EXPECT_EQ(priorities_text(NodeNameList(), std::span<const int>{}), "[]");
  EXPECT_THROW(priorities_text(hosts, std::span(each).first(1)), std::invalid_argument)
      << "a score for every host, or no answer";
}

// A list's names are written without a check only when every one of them needs no escape; a list with one
// that does is written through nlohmann's serialiser, name by name, whichever was asked first.
TEST(ExtenderAnswerText, AListIsWrittenAsItIsOnlyWhenEveryNameIsPlain) {
  EXPECT_TRUE(NodeNameList().all_plain());
  EXPECT_TRUE(NodeNameList({"node-1", "a.b-c", std::string(253, 'x')}).all_plain());
  // Each byte that is not written as it is (nlohmann's dump escapes it or checks it as UTF-8).
  for (std::string odd_one :
       {std::string("q\"uote"), std::string("back\\slash"), std::string("tab\t"), std::string("nul\0", 4),
        std::string("del\x7f"), std::string("\xc3\xa9t\xc3\xa9")}) {
    const NodeNameList list = {"node-1", odd_one, "node-3"};
    EXPECT_FALSE(list.all_plain()) << odd_one;
    EXPECT_FALSE(list.all_plain()) << "asked again: " << odd_one;
    const std::vector<int> each = {1, 2, 3};
    const std::vector<NodeScore> scores = {{"node-1", 1}, {odd_one, 2}, {"node-3", 3}};
    EXPECT_EQ(priorities_text(list, each), priorities_json(scores).dump()) << odd_one;
  }
  // A list that shares its storage shares the answer: copies of a plain list are plain.
  const NodeNameList first = {"node-1", "node-2"};
  // NOLINTNEXTLINE(performance-unnecessary-copy-initialization): the copy is the point
  const NodeNameList copy = first;
  EXPECT_TRUE(first.all_plain());
  EXPECT_TRUE(copy.all_plain());
}

// The server's filter answer (NamesOfArgs: the result's names are the request's) is the tree's dump too, for
// lists whose names are all plain (written without a check) and for lists with names that are not (each
// checked, escaped as nlohmann does): names passed, failed and unresolvable drawn from the request's list.
TEST(ExtenderAnswerText, TheServersFilterAnswerFromTheRequestsNamesIsTheTreesDump) {
  std::mt19937 rng(13);
  for (int i = 0; i < 2000; ++i) {
    const bool all_plain = rng() % 2 == 0;
    std::vector<std::string> names;
    int n = 1 + static_cast<int>(rng() % 8);
    names.reserve(static_cast<std::size_t>(n));
    for (int k = 0; k < n; ++k) names.push_back(all_plain ? "node-" + std::to_string(rng() % 100) : odd(rng));
    ExtenderArgs args;
    args.node_names = NodeNameList(names);
    FilterResult r;
    const std::uint32_t shared = r.failed.reason("2 of 8 chips free");
    for (const auto& name : names) {
      switch (rng() % 3) {
        case 0:
          r.passed.push_back(name);
          break;
        case 1:
          r.failed.add(name, rng() % 2 ? shared : r.failed.reason(odd(rng)));
          break;
        default:
          r.unresolvable.set(name, "node " + name + " is not in the scheduler's cluster file");
      }
    }
    const std::string tree = filter_result_json(args, r).dump();
    ASSERT_EQ(filter_result_text(args, r, NamesOfArgs{}), tree) << ::testing::PrintToString(names);
    ASSERT_EQ(filter_result_text(args, r), tree);
  }
}

// NodeReasons reads as the std::map<name, reason> it replaced, each name's last reason given: names in any
// order, repeated, with ranks (their places among a cluster's sorted names) or without, shared reasons or
// not, read at any point and added to again.
TEST(NodeReasons, ReadsAsAMapOfEachNamesLastReason) {
  std::mt19937 rng(11);
  std::vector<std::string> cluster;
  cluster.reserve(40);
  for (int k = 0; k < 40; ++k) cluster.push_back("node-" + std::to_string(rng() % 1000));
  std::sort(cluster.begin(), cluster.end());
  cluster.erase(std::unique(cluster.begin(), cluster.end()), cluster.end());
  for (int i = 0; i < 3000; ++i) {
    NodeReasons r;
    std::map<std::string, std::string> m;
    std::vector<std::uint32_t> shared = {r.reason("shared a"), r.reason("shared b")};
    int n = static_cast<int>(rng() % 12);
    bool in_order = rng() % 3 == 0;
    for (int k = 0; k < n; ++k) {
      std::size_t at = in_order ? std::min<std::size_t>(cluster.size() - 1, static_cast<std::size_t>(k) * 3)
                                : rng() % cluster.size();
      std::string name = rng() % 5 == 0 ? "other-" + std::to_string(rng() % 4) : cluster[at];
      auto rank = static_cast<std::uint32_t>(std::lower_bound(cluster.begin(), cluster.end(), name) -
                                             cluster.begin());
      bool known = at < cluster.size() && cluster[at] == name && rng() % 4 != 0;
      std::uint32_t why = rng() % 3 == 0 ? r.reason("why " + std::to_string(rng() % 3)) : shared[rng() % 2];
      r.add(name, why, known ? rank : NodeReasons::kNoRank);
      m[name] = r.text(why);
      if (rng() % 4 == 0) {  // read in between: a later add still lands in its place
        ASSERT_EQ(r.size(), m.size());
      }
    }
    ASSERT_EQ(r.size(), m.size());
    ASSERT_EQ(r.empty(), m.empty());
    std::vector<std::pair<std::string, std::string>> got;
    for (const auto& [name, why] : r) got.emplace_back(name, why);
    using Items = std::vector<std::pair<std::string, std::string>>;
    ASSERT_EQ(got, Items(m.begin(), m.end()));
    for (const auto& [name, why] : m) ASSERT_EQ(r.at(name), why);
    EXPECT_EQ(r.find("absent"), nullptr);
    if (!m.empty()) {
      EXPECT_EQ(r.begin()->second, m.begin()->second);
    }
  }
  EXPECT_THROW((void)NodeReasons{}.at("n"), std::out_of_range);
}

TEST(ExtenderAnswerText, FullNodeObjectsAndBadUtf8AsTheTree) {
  ExtenderArgs args;
  args.full_nodes = true;
  args.node_names = {"n-1", "n-2"};
  args.nodes = {json{{"metadata", {{"name", "n-1"}}}}, json{{"metadata", {{"name", "n-2"}}}}};
  FilterResult r;
  r.passed = {"n-2"};
  EXPECT_EQ(filter_result_text(args, r), filter_result_json(args, r).dump());
  // nlohmann refuses to write invalid UTF-8; so does the direct writer (the server answers 500 either way).
  FilterResult bad;
  bad.failed.set("n-1", "\xff");
  EXPECT_THROW((void)filter_result_text(ExtenderArgs{}, bad), json::type_error);
  EXPECT_THROW((void)filter_result_json(ExtenderArgs{}, bad).dump(), json::type_error);
}

}  // namespace
}  // namespace ascend::scheduler
