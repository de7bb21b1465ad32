// The shim's fast path for a container that asks for no NPU (issue 25): every container on the host passes
// through ascend-docker-runtime, so for most of them it should cost an exec and a look at process.env, not
// a parse of config.json into a tree. Pure; thread-safe.
#pragma once

#include <string_view>

namespace ascend::hook {

// True only when config.json `text` certainly asks for nothing, decided in one pass without building a tree:
//   - the text is a JSON object that parse_spec (oci.h) accepts: valid JSON (strings well-formed UTF-8 with
//     valid escapes, no BOM), nesting at most 64 deep, at most 16 MiB, and every field parse_spec checks of
//     the type it wants (process.env and capabilities.bounding lists of strings, root.path a string, mounts,
//     linux.devices, linux.resources.devices and hooks lists of objects with typed fields);
//   - no entry of process.env is ASCEND_VISIBLE_DEVICES or starts with it (after unescaping);
//   - no mount's destination names the device-marker folder (trust.h: the orchestrator's request).
// Then the full path (parse_spec, trusted_request_env, requests_devices) would find no request either, and
// the shim leaves config.json alone. false means "read it the full way" (which may still find nothing, or
// an error); this never decides that a container does ask.
bool spec_requests_nothing(std::string_view text);

}  // namespace ascend::hook
