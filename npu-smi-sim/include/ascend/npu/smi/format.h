// The npu-smi output formats, as pure functions from a View (or a HostState) to the exact bytes the real
// tool prints. Layouts follow the captures in tests/fixtures/npu-smi (see its README for each source):
//   - "A2/A3 classic" table, 98 columns, for 910 (A1), 910B and 910_93 (A3: Phy-ID column, "-" power on
//     die 1, a full "+----+" line between the dies of a card);
//   - "310/310P" table, 106 columns, for 310P (Device column, no HBM, power "NA");
//   - key:value lines "\t%-30s : %s" for -l, -t board/usages/common/health/memory/power/temp/vnpu-mode;
//   - the -m mapping columns, the topo matrix, and the template-info / info-vnpu boxes.
// Telemetry that the state does not carry (board identity, clocks, die ids) is derived per chip family in
// telemetry.h; the vNPU resource accounting is vnpu_resources.h. Thread-safe (no shared state).
#pragma once

#include <string>
#include <string_view>

#include "ascend/npu/smi/view.h"
#include "ascend/npu/state.h"

namespace ascend::npu::smi {

// "\t<key padded to 30> : <value>\n", the real tool's key:value line.
std::string kv(std::string_view key, std::string_view value);

std::string info_table(const View& v);  // npu-smi info
std::string card_list(const View& v);   // npu-smi info -l
std::string mapping(const View& v);     // npu-smi info -m
std::string topo(const View& v);        // npu-smi info -t topo

// -t board -i N: the card; with -c C: one chip of it.
std::string card_board(const View& v, const Card& card);
std::string chip_board(const View& v, const Device& d);
// -t usages|common|health|memory|power|temp -i N [-c C]: `only` restricts the output to one device of the
// card.
std::string usages(const View& v, const Card& card, const Device* only);
std::string common(const View& v, const Card& card, const Device* only);
std::string health(const View& v, const Card& card, const Device* only);
std::string memory(const View& v, const Card& card, const Device* only);
std::string power(const View& v, const Card& card, const Device* only);  // -t power (live value)
std::string temp(const View& v, const Card& card, const Device* only);   // -t temp (live value)

std::string template_info(const HostState& s);                // -t template-info
std::string info_vnpu(const HostState& s, const Chip& chip);  // -t info-vnpu -i N -c C
std::string vnpu_mode(const HostState& s);                    // -t vnpu-mode

}  // namespace ascend::npu::smi
