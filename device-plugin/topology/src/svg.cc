#include "ascend/topology/svg.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace ascend::topology {
namespace {

constexpr int kCell = 34;    // chip square
constexpr int kGap = 5;      // between chips
constexpr int kPad = 8;      // inside a node box
constexpr int kHeader = 18;  // node name above its chips
constexpr int kNodeGap = 12;
constexpr int kLeafLabel = 120;
constexpr int kNodesPerLine = 16;

// Qualitative palette (Tableau 20, strong colours first) for pipeline stages.
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
                                    "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5",
                                    "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5", "#393b79"};
constexpr int kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

std::string esc(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += ch;
    }
  }
  return o;
}

bool dark(const char* hex) {
  unsigned r = 0, g = 0, b = 0;
  std::sscanf(hex, "#%02x%02x%02x", &r, &g, &b);
  return 0.299 * r + 0.587 * g + 0.114 * b < 150;
}

// Grid position (column, row) of every slot of a node type.
struct Layout {
  std::vector<std::pair<int, int>> pos;
  int cols = 0;
  int rows = 0;
};

Layout layout_of(const NodeType& t) {
  Layout l;
  l.pos.resize(static_cast<std::size_t>(t.size));
  std::size_t max_card = 0;
  for (auto m : t.card_masks)
    max_card = std::max<std::size_t>(max_card, static_cast<std::size_t>(__builtin_popcountll(m)));
  if (max_card > 1) {
    // Cards as columns, dies / chips of a card stacked.
    for (std::size_t ci = 0; ci < t.card_masks.size(); ++ci) {
      int row = 0;
      for (int s : t.canonical) {
        if ((t.card_masks[ci] >> s & 1) != 0)
          l.pos[static_cast<std::size_t>(s)] = {static_cast<int>(ci), row++};
      }
      l.rows = std::max(l.rows, row);
    }
    l.cols = static_cast<int>(t.card_masks.size());
  } else if (t.domain_masks.size() > 1 && t.domain_masks.size() <= 4) {
    // One row per HCCS domain (the rings of an Ascend 910 node).
    for (std::size_t d = 0; d < t.domain_masks.size(); ++d) {
      int col = 0;
      for (int s : t.canonical) {
        if ((t.domain_masks[d] >> s & 1) != 0)
          l.pos[static_cast<std::size_t>(s)] = {col++, static_cast<int>(d)};
      }
      l.cols = std::max(l.cols, col);
    }
    l.rows = static_cast<int>(t.domain_masks.size());
  } else {
    int per_row = t.size <= 4 ? t.size : (t.size + 1) / 2;
    int i = 0;
    for (int s : t.canonical) {
      l.pos[static_cast<std::size_t>(s)] = {i % per_row, i / per_row};
      ++i;
    }
    l.cols = per_row;
    l.rows = (t.size + per_row - 1) / per_row;
  }
  return l;
}

}  // namespace

std::string render_svg(const Cluster& c, const ClusterState& before, const Job& job, const Placement& p) {
  std::vector<Layout> layouts;
  for (const auto& t : c.types) layouts.push_back(layout_of(t));
  auto box_w = [&](int node) {
    return layouts[static_cast<std::size_t>(c.nodes[static_cast<std::size_t>(node)].type)].cols *
               (kCell + kGap) -
           kGap + 2 * kPad;
  };
  auto box_h = [&](int node) {
    return layouts[static_cast<std::size_t>(c.nodes[static_cast<std::size_t>(node)].type)].rows *
               (kCell + kGap) -
           kGap + 2 * kPad + kHeader;
  };

  // rank of each chip
  std::map<std::pair<int, int>, int> rank_at;
  std::set<int> used_leaves;
  for (std::size_t r = 0; r < p.chips.size(); ++r) {
    rank_at[{p.chips[r].node, p.chips[r].slot}] = static_cast<int>(r);
    used_leaves.insert(c.nodes[static_cast<std::size_t>(p.chips[r].node)].leaf);
  }
  bool all = c.nodes.size() <= 64;
  std::vector<int> leaves;
  for (const auto& sl : c.spine_leaves) {
    for (int leaf : sl) {
      if (all || used_leaves.count(leaf) != 0) leaves.push_back(leaf);
    }
  }

  // Place node boxes: one block of lines per leaf.
  struct Box {
    int x, y;
  };
  std::map<int, Box> box;
  struct LeafRow {
    int leaf, y, h;
  };
  std::vector<LeafRow> rows;
  const int top = 96;
  int y = top;
  int width = 0;
  for (int leaf : leaves) {
    const auto& nodes = c.leaf_nodes[static_cast<std::size_t>(leaf)];
    int y0 = y;
    for (std::size_t i = 0; i < nodes.size(); i += kNodesPerLine) {
      int x = kLeafLabel;
      int line_h = 0;
      for (std::size_t k = i; k < std::min(nodes.size(), i + kNodesPerLine); ++k) {
        box[nodes[k]] = {x, y};
        x += box_w(nodes[k]) + kNodeGap;
        line_h = std::max(line_h, box_h(nodes[k]));
      }
      width = std::max(width, x);
      y += line_h + kNodeGap;
    }
    rows.push_back({leaf, y0, y - y0 - kNodeGap});
    y += 10;
  }
  int height = y + 10;
  width = std::max(width + 10, 760);

  std::ostringstream o;
  char buf[256];
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" viewBox=\"0 0 " << width << ' ' << height
    << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  // Title and legend.
  std::snprintf(buf, sizeof buf, "total %.4g s (tp %.4g, pp %.4g, dp %.4g)", p.eval.cost.total,
                p.eval.cost.tp, p.eval.cost.pp, p.eval.cost.dp);
  o << "<text x=\"10\" y=\"22\" font-size=\"16\" font-weight=\"bold\">" << esc(c.name) << ": job "
    << esc(p.job) << " (" << job.npus << " NPUs = tp " << job.tp << " x pp " << job.pp << " x dp " << job.dp
    << ", " << to_string(job.order) << "), policy " << to_string(p.policy) << "</text>\n";
  o << "<text x=\"10\" y=\"42\" font-size=\"13\">cost " << buf
    << "; TP groups outside HCCS: " << p.eval.tp_groups_outside_hccs << "</text>\n";
  int lx = 10;
  const int ly = 56;
  auto swatch = [&](const std::string& fill, const std::string& label, const std::string& extra = "") {
    o << "<rect x=\"" << lx << "\" y=\"" << ly << "\" width=\"16\" height=\"16\" rx=\"3\" fill=\"" << fill
      << "\" stroke=\"#555\"" << extra << "/>";
    o << "<text x=\"" << lx + 21 << "\" y=\"" << ly + 13 << "\" font-size=\"12\">" << esc(label)
      << "</text>\n";
    lx += 28 + static_cast<int>(label.size()) * 7;
  };
  int stages_shown = std::min(job.pp, 12);
  for (int s = 0; s < stages_shown; ++s) swatch(kPalette[s % kPaletteSize], "stage " + std::to_string(s));
  if (job.pp > stages_shown) {
    o << "<text x=\"" << lx << "\" y=\"" << ly + 13 << "\" font-size=\"12\">... " << job.pp
      << " stages</text>\n";
    lx += 90;
  }
  swatch("#ffffff", "free");
  swatch("#c9c9c9", "busy");
  swatch("#f6d5d5", "unhealthy");
  o << "<rect x=\"" << lx << "\" y=\"" << ly - 2
    << "\" width=\"30\" height=\"20\" rx=\"5\" fill=\"none\" stroke=\"#111\" "
    << "stroke-width=\"2.5\"/><text x=\"" << lx + 36 << "\" y=\"" << ly + 13
    << "\" font-size=\"12\">TP group</text>\n";
  lx += 110;
  o << "<rect x=\"" << lx << "\" y=\"" << ly - 2
    << "\" width=\"30\" height=\"20\" rx=\"5\" fill=\"none\" stroke=\"#d00\" "
    << "stroke-width=\"2.5\" stroke-dasharray=\"5,3\"/><text x=\"" << lx + 36 << "\" y=\"" << ly + 13
    << "\" font-size=\"12\">TP group outside HCCS</text>\n";
  if (!all) {
    o << "<text x=\"10\" y=\"" << ly + 34 << "\" font-size=\"12\" fill=\"#555\">" << c.nodes.size()
      << " nodes in " << c.leaves.size() << " leaves; showing the " << leaves.size()
      << " leaves the job uses</text>\n";
  }

  auto cell_xy = [&](int node, int slot) {
    const Box& b = box[node];
    const auto& pos = layouts[static_cast<std::size_t>(c.nodes[static_cast<std::size_t>(node)].type)]
                          .pos[static_cast<std::size_t>(slot)];
    return std::pair(b.x + kPad + pos.first * (kCell + kGap),
                     b.y + kHeader + kPad + pos.second * (kCell + kGap));
  };

  // Leaf labels and bands.
  for (const auto& row : rows) {
    const std::string& spine =
        c.spines[static_cast<std::size_t>(c.leaf_spine[static_cast<std::size_t>(row.leaf)])];
    o << "<rect x=\"4\" y=\"" << row.y - 4 << "\" width=\"" << width - 8 << "\" height=\"" << row.h + 8
      << "\" rx=\"6\" fill=\"#f3f5f8\" stroke=\"#d5dae2\"/>\n";
    o << "<text x=\"12\" y=\"" << row.y + 18 << "\" font-size=\"13\" font-weight=\"bold\">"
      << esc(c.leaves[static_cast<std::size_t>(row.leaf)]) << "</text>";
    o << "<text x=\"12\" y=\"" << row.y + 36 << "\" font-size=\"11\" fill=\"#555\">" << esc(spine)
      << "</text>\n";
  }
  // Nodes and chips.
  for (const auto& [node, b] : box) {
    const Node& nd = c.nodes[static_cast<std::size_t>(node)];
    const NodeType& t = c.type_of(node);
    o << "<g><rect x=\"" << b.x << "\" y=\"" << b.y << "\" width=\"" << box_w(node) << "\" height=\""
      << box_h(node) << "\" rx=\"6\" fill=\"#ffffff\" stroke=\"#8a94a6\" stroke-width=\"1.2\"/>";
    o << "<text x=\"" << b.x + kPad << "\" y=\"" << b.y + 14 << "\" font-size=\"11\" fill=\"#333\">"
      << esc(nd.name) << "</text>\n";
    for (int s = 0; s < t.size; ++s) {
      auto [x, cy] = cell_xy(node, s);
      auto it = rank_at.find({node, s});
      std::uint64_t bit = 1ULL << s;
      if (it != rank_at.end()) {
        int stage = coord_of(job, it->second).p;
        const char* fill = kPalette[stage % kPaletteSize];
        o << "<rect x=\"" << x << "\" y=\"" << cy << "\" width=\"" << kCell << "\" height=\"" << kCell
          << "\" rx=\"4\" fill=\"" << fill << "\" stroke=\"#333\" stroke-width=\"0.6\"><title>rank "
          << it->second << ", stage " << stage << ", device " << t.phy[static_cast<std::size_t>(s)]
          << "</title></rect>";
        int fs = it->second >= 1000 ? 10 : 12;
        o << "<text x=\"" << x + kCell / 2 << "\" y=\"" << cy + kCell / 2 + 4 << "\" font-size=\"" << fs
          << "\" text-anchor=\"middle\" font-weight=\"bold\" fill=\"" << (dark(fill) ? "#ffffff" : "#111111")
          << "\">" << it->second << "</text>\n";
      } else if ((nd.unhealthy & bit) != 0) {
        o << "<rect x=\"" << x << "\" y=\"" << cy << "\" width=\"" << kCell << "\" height=\"" << kCell
          << "\" rx=\"4\" fill=\"#f6d5d5\" stroke=\"#c33\"/><path d=\"M" << x + 7 << ' ' << cy + 7 << " L"
          << x + kCell - 7 << ' ' << cy + kCell - 7 << " M" << x + kCell - 7 << ' ' << cy + 7 << " L" << x + 7
          << ' ' << cy + kCell - 7 << "\" stroke=\"#c33\" stroke-width=\"2\"/>\n";
      } else if ((before.free[static_cast<std::size_t>(node)] & bit) == 0) {
        o << "<rect x=\"" << x << "\" y=\"" << cy << "\" width=\"" << kCell << "\" height=\"" << kCell
          << "\" rx=\"4\" fill=\"#c9c9c9\" stroke=\"#999\"/>\n";
      } else {
        o << "<rect x=\"" << x << "\" y=\"" << cy << "\" width=\"" << kCell << "\" height=\"" << kCell
          << "\" rx=\"4\" fill=\"#ffffff\" stroke=\"#b5bcc8\"/>\n";
      }
    }
    o << "</g>\n";
  }
  // TP group outlines: one rounded box per (group, node) around the group's chips there.
  Groups groups = groups_of(job);
  for (const auto& g : groups.tp) {
    if (g.size() < 2) continue;
    std::map<int, std::array<int, 4>> bounds;  // node -> x0, y0, x1, y1
    bool outside = false;
    const ChipRef& first = p.chips[static_cast<std::size_t>(g.front())];
    for (int r : g) {
      const ChipRef& ch = p.chips[static_cast<std::size_t>(r)];
      if (ch.node != first.node) {
        outside = true;
      } else {
        Level l = c.type_of(ch.node).level_of(first.slot, ch.slot);
        outside = outside || (l != Level::kSio && l != Level::kHccs);
      }
      if (box.count(ch.node) == 0) continue;
      auto [x, cy] = cell_xy(ch.node, ch.slot);
      auto& bd = bounds.try_emplace(ch.node, std::array<int, 4>{x, cy, x + kCell, cy + kCell}).first->second;
      bd = {std::min(bd[0], x), std::min(bd[1], cy), std::max(bd[2], x + kCell), std::max(bd[3], cy + kCell)};
    }
    for (const auto& [node, bd] : bounds) {
      o << "<rect x=\"" << bd[0] - 3 << "\" y=\"" << bd[1] - 3 << "\" width=\"" << bd[2] - bd[0] + 6
        << "\" height=\"" << bd[3] - bd[1] + 6 << "\" rx=\"6\" fill=\"none\" stroke=\""
        << (outside ? "#d00" : "#111") << "\" stroke-width=\"2.5\""
        << (outside ? " stroke-dasharray=\"5,3\"" : "") << "/>\n";
    }
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace ascend::topology
