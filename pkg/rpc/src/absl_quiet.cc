// SPDX-License-Identifier: Apache-2.0
// absl_quiet.cc - turns off abseil's mutex deadlock detection for the gRPC
// C core this process links (called by rpc_init; see absl_quiet.h).
//
// C++ because the switch is abseil C++ API only. Debian builds abseil
// without NDEBUG, so every absl::Mutex that gRPC locks also records the
// lock in a global graph and checks it for cycles, on every lock gRPC takes
// (docs/bench/history.md, "Abseil's deadlock detection off"). That check is a
// debugging aid for abseil's own users; a release build of abseil does not
// do it, and neither should a production service. Debian's abseil keeps its
// symbols in an inline namespace (absl::debian3), which this name resolves
// to at compile time, so no version is spelled here.
#include <absl/synchronization/mutex.h>

#include "absl_quiet.h"

extern "C" void rpc__absl_deadlock_detection_off(void)
{
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}
