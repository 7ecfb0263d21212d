// kiln/ir/npy.h - NumPy .npy files (format 1.0 to 3.0, little-endian, C order).
#pragma once

#include <string>

#include "kiln/ir/host_tensor.h"

namespace kiln {

/// Reads a .npy file of dtype <f4, <f8, <i4, <i8 or |b1. Throws kiln::Error naming the
/// file and what is wrong (unsupported dtype, Fortran order, truncated data...).
HostTensor read_npy(const std::string& path);

/// Writes `t` as a version 1.0 .npy file that numpy.load reads.
void write_npy(const std::string& path, const HostTensor& t);

}  // namespace kiln
