#include "ascend/topology/svg.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

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

struct Box {
  int x = 0;
  int y = 0;
};

// A band of node boxes: the lines of one leaf's nodes.
struct LeafRow {
  int leaf = 0;
  int y = 0;
  int h = 0;
};

const int kTop = 96;  // the first leaf's band, below the title and the legend
const int kLegendY = 56;

// Where everything goes: the layout of each node type, the box of each node drawn, the band of each leaf
// drawn (all of them, or on large clusters only the job's), and the picture's size.
struct Geometry {
  Geometry(const Cluster& cluster, const Placement& p);

  int box_w(int node) const { return layout(node).cols * (kCell + kGap) - kGap + 2 * kPad; }
  int box_h(int node) const { return layout(node).rows * (kCell + kGap) - kGap + 2 * kPad + kHeader; }
  // Top-left corner of a chip's square.
  std::pair<int, int> cell_xy(int node, int slot) const {
    const Box& b = box.at(node);
    const auto& pos = layout(node).pos[static_cast<std::size_t>(slot)];
    return {b.x + kPad + pos.first * (kCell + kGap), b.y + kHeader + kPad + pos.second * (kCell + kGap)};
  }

  const Cluster& c;
  std::vector<Layout> layouts;  // per node type
  bool all = false;             // every leaf drawn
  std::vector<int> leaves;      // the leaves drawn
  std::map<int, Box> box;       // node -> its box
  std::vector<LeafRow> rows;
  int width = 0;
  int height = 0;

 private:
  const Layout& layout(int node) const {
    return layouts[static_cast<std::size_t>(c.nodes[static_cast<std::size_t>(node)].type)];
  }
  void place_boxes();
};

Geometry::Geometry(const Cluster& cluster, const Placement& p) : c(cluster), all(cluster.nodes.size() <= 64) {
  for (const auto& t : c.types) layouts.push_back(layout_of(t));
  std::set<int> used_leaves;
  for (const ChipRef& ch : p.chips) used_leaves.insert(c.nodes[static_cast<std::size_t>(ch.node)].leaf);
  for (const auto& sl : c.spine_leaves) {
    for (int leaf : sl) {
      if (all || used_leaves.count(leaf) != 0) leaves.push_back(leaf);
    }
  }
  place_boxes();
}

// One block of lines per leaf, kNodesPerLine boxes to a line.
void Geometry::place_boxes() {
  int y = kTop;
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
  height = y + 10;
  width = std::max(width + 10, 760);
}

void draw_title(std::ostream& o, const Geometry& g, const Job& job, const Placement& p) {
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << g.width << "\" height=\"" << g.height
    << "\" viewBox=\"0 0 " << g.width << ' ' << g.height
    << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  char cost[256];
  std::snprintf(cost, sizeof cost, "total %.4g s (tp %.4g, pp %.4g, dp %.4g)", p.eval.cost.total,
                p.eval.cost.tp, p.eval.cost.pp, p.eval.cost.dp);
  o << "<text x=\"10\" y=\"22\" font-size=\"16\" font-weight=\"bold\">" << esc(g.c.name) << ": job "
    << esc(p.job) << " (" << job.npus << " NPUs = tp " << job.tp << " x pp " << job.pp << " x dp " << job.dp
    << ", " << to_string(job.order) << "), policy " << to_string(p.policy) << "</text>\n";
  o << "<text x=\"10\" y=\"42\" font-size=\"13\">cost " << cost
    << "; TP groups outside HCCS: " << p.eval.tp_groups_outside_hccs << "</text>\n";
}

// An outlined rectangle in the legend: a TP group, solid black or (outside HCCS) dashed red.
void draw_outline_key(std::ostream& o, int lx, const char* stroke, const char* dash, const char* label) {
  o << "<rect x=\"" << lx << "\" y=\"" << kLegendY - 2
    << "\" width=\"30\" height=\"20\" rx=\"5\" fill=\"none\" stroke=\"" << stroke << "\" "
    << "stroke-width=\"2.5\"" << dash << "/><text x=\"" << lx + 36 << "\" y=\"" << kLegendY + 13
    << "\" font-size=\"12\">" << label << "</text>\n";
}

// Stage colours (at most 12, then the count), chip states, TP group outlines; on large clusters, which
// leaves are shown.
void draw_legend(std::ostream& o, const Geometry& g, const Job& job) {
  int lx = 10;
  const int ly = kLegendY;
  auto swatch = [&](const std::string& fill, const std::string& label) {
    o << "<rect x=\"" << lx << "\" y=\"" << ly << "\" width=\"16\" height=\"16\" rx=\"3\" fill=\"" << fill
      << "\" stroke=\"#555\"/>";
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
  draw_outline_key(o, lx, "#111", "", "TP group");
  draw_outline_key(o, lx + 110, "#d00", " stroke-dasharray=\"5,3\"", "TP group outside HCCS");
  if (!g.all) {
    o << "<text x=\"10\" y=\"" << ly + 34 << "\" font-size=\"12\" fill=\"#555\">" << g.c.nodes.size()
      << " nodes in " << g.c.leaves.size() << " leaves; showing the " << g.leaves.size()
      << " leaves the job uses</text>\n";
  }
}

// Each leaf's band with its name and its spine's.
void draw_leaf_bands(std::ostream& o, const Geometry& g) {
  const Cluster& c = g.c;
  for (const auto& row : g.rows) {
    const std::string& spine =
        c.spines[static_cast<std::size_t>(c.leaf_spine[static_cast<std::size_t>(row.leaf)])];
    o << "<rect x=\"4\" y=\"" << row.y - 4 << "\" width=\"" << g.width - 8 << "\" height=\"" << row.h + 8
      << "\" rx=\"6\" fill=\"#f3f5f8\" stroke=\"#d5dae2\"/>\n";
    o << "<text x=\"12\" y=\"" << row.y + 18 << "\" font-size=\"13\" font-weight=\"bold\">"
      << esc(c.leaves[static_cast<std::size_t>(row.leaf)]) << "</text>";
    o << "<text x=\"12\" y=\"" << row.y + 36 << "\" font-size=\"11\" fill=\"#555\">" << esc(spine)
      << "</text>\n";
  }
}

// A chip of the job: its stage's colour, its rank written on it, a tooltip.
void draw_rank(std::ostream& o, int x, int y, int rank, int stage, int device) {
  const char* fill = kPalette[stage % kPaletteSize];
  o << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << kCell << "\" height=\"" << kCell
    << "\" rx=\"4\" fill=\"" << fill << "\" stroke=\"#333\" stroke-width=\"0.6\"><title>rank " << rank
    << ", stage " << stage << ", device " << device << "</title></rect>";
  int fs = rank >= 1000 ? 10 : 12;
  o << "<text x=\"" << x + kCell / 2 << "\" y=\"" << y + kCell / 2 + 4 << "\" font-size=\"" << fs
    << "\" text-anchor=\"middle\" font-weight=\"bold\" fill=\"" << (dark(fill) ? "#ffffff" : "#111111")
    << "\">" << rank << "</text>\n";
}

// A chip outside the job: unhealthy (crossed), busy (grey) or free.
void draw_other_chip(std::ostream& o, int x, int y, bool unhealthy, bool free) {
  o << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << kCell << "\" height=\"" << kCell
    << "\" rx=\"4\" ";
  if (unhealthy) {
    o << "fill=\"#f6d5d5\" stroke=\"#c33\"/><path d=\"M" << x + 7 << ' ' << y + 7 << " L" << x + kCell - 7
      << ' ' << y + kCell - 7 << " M" << x + kCell - 7 << ' ' << y + 7 << " L" << x + 7 << ' '
      << y + kCell - 7 << "\" stroke=\"#c33\" stroke-width=\"2\"/>\n";
  } else if (!free) {
    o << "fill=\"#c9c9c9\" stroke=\"#999\"/>\n";
  } else {
    o << "fill=\"#ffffff\" stroke=\"#b5bcc8\"/>\n";
  }
}

// Every node drawn: its box, its name, its chips.
void draw_nodes(std::ostream& o, const Geometry& g, const ClusterState& before, const Job& job,
                const Placement& p) {
  std::map<std::pair<int, int>, int> rank_at;
  for (std::size_t r = 0; r < p.chips.size(); ++r)
    rank_at[{p.chips[r].node, p.chips[r].slot}] = static_cast<int>(r);
  for (const auto& [node, b] : g.box) {
    const Node& nd = g.c.nodes[static_cast<std::size_t>(node)];
    const NodeType& t = g.c.type_of(node);
    o << "<g><rect x=\"" << b.x << "\" y=\"" << b.y << "\" width=\"" << g.box_w(node) << "\" height=\""
      << g.box_h(node) << "\" rx=\"6\" fill=\"#ffffff\" stroke=\"#8a94a6\" stroke-width=\"1.2\"/>";
    o << "<text x=\"" << b.x + kPad << "\" y=\"" << b.y + 14 << "\" font-size=\"11\" fill=\"#333\">"
      << esc(nd.name) << "</text>\n";
    for (int s = 0; s < t.size; ++s) {
      auto [x, y] = g.cell_xy(node, s);
      std::uint64_t bit = 1ULL << s;
      if (auto it = rank_at.find({node, s}); it != rank_at.end()) {
        draw_rank(o, x, y, it->second, coord_of(job, it->second).p, t.phy[static_cast<std::size_t>(s)]);
      } else {
        draw_other_chip(o, x, y, (nd.unhealthy & bit) != 0,
                        (before.free[static_cast<std::size_t>(node)] & bit) != 0);
      }
    }
    o << "</g>\n";
  }
}

// One rounded outline per (TP group, node) around the group's chips there; dashed red when the group is
// not all on one node within SIO or HCCS reach of its first chip.
void draw_tp_groups(std::ostream& o, const Geometry& g, const Job& job, const Placement& p) {
  for (const auto& grp : groups_of(job).tp) {
    if (grp.size() < 2) continue;
    std::map<int, std::array<int, 4>> bounds;  // node -> x0, y0, x1, y1
    bool outside = false;
    const ChipRef& first = p.chips[static_cast<std::size_t>(grp.front())];
    for (int r : grp) {
      const ChipRef& ch = p.chips[static_cast<std::size_t>(r)];
      if (ch.node != first.node) {
        outside = true;
      } else {
        Level l = g.c.type_of(ch.node).level_of(first.slot, ch.slot);
        outside = outside || (l != Level::kSio && l != Level::kHccs);
      }
      if (g.box.count(ch.node) == 0) continue;
      auto [x, y] = g.cell_xy(ch.node, ch.slot);
      auto& bd = bounds.try_emplace(ch.node, std::array<int, 4>{x, y, x + kCell, y + kCell}).first->second;
      bd = {std::min(bd[0], x), std::min(bd[1], y), std::max(bd[2], x + kCell), std::max(bd[3], y + kCell)};
    }
    for (const auto& [node, bd] : bounds) {
      o << "<rect x=\"" << bd[0] - 3 << "\" y=\"" << bd[1] - 3 << "\" width=\"" << bd[2] - bd[0] + 6
        << "\" height=\"" << bd[3] - bd[1] + 6 << "\" rx=\"6\" fill=\"none\" stroke=\""
        << (outside ? "#d00" : "#111") << "\" stroke-width=\"2.5\""
        << (outside ? " stroke-dasharray=\"5,3\"" : "") << "/>\n";
    }
  }
}

}  // namespace

std::string render_svg(const Cluster& c, const ClusterState& before, const Job& job, const Placement& p) {
  const Geometry g(c, p);
  std::ostringstream o;
  draw_title(o, g, job, p);
  draw_legend(o, g, job);
  draw_leaf_bands(o, g);
  draw_nodes(o, g, before, job, p);
  draw_tp_groups(o, g, job, p);
  o << "</svg>\n";
  return o.str();
}

}  // namespace ascend::topology
