// The sandbox's init program (sandbox_init_main.cc, a static executable), embedded in
// the library at build time (the genrule in sandbox-svc/BUILD), so that the service,
// `gantry sandbox exec` and every test run the init built with this code, with no
// file to find or keep in step at run time. isolation.cc hands it to bwrap from a
// sealed memfd (--ro-bind-data).
#ifndef GANTRY_SANDBOX_SVC_INIT_IMAGE_H_
#define GANTRY_SANDBOX_SVC_INIT_IMAGE_H_

#include <string_view>

namespace gantry::sandbox {

// The bytes of the init executable.
std::string_view SandboxInitImage();

}  // namespace gantry::sandbox

#endif  // GANTRY_SANDBOX_SVC_INIT_IMAGE_H_
