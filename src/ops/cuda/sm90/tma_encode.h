// The driver's cuTensorMapEncodeTiled for every sm90 kernel that builds TMA descriptors on the host.
#pragma once

#include <cudaTypedefs.h>

namespace mla::sm90 {

// Looked up once through the runtime's driver entry point, so nothing links against libcuda (the binaries
// carry a static cudart); nullptr when the driver does not offer it (callers turn that into a Status).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encode_fn();

}  // namespace mla::sm90
