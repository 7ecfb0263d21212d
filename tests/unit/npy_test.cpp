// .npy files: round trip, NumPy interoperability, and clear errors on bad files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kiln/ir/npy.h"

namespace kiln {
namespace {

std::filesystem::path scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_npy_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

TEST(Npy, RoundTripsEveryDType) {
  const HostTensor tensors[] = {
      HostTensor::from_vector<float>({1.5f, -2, 3, 4, 5, 6}, {2, 3}),
      HostTensor::from_vector<double>({0.25}, {}),
      HostTensor::from_vector<int32_t>({-1, 2, 3}, {3}),
      HostTensor::from_vector<int64_t>({1LL << 40, -5}, {2, 1}),
      HostTensor::from_vector<bool>({true, false, true, true}, {2, 2}),
      HostTensor(TensorType{DType::F32, {0, 4}}),
  };
  for (const HostTensor& t : tensors) {
    const auto path = scratch("rt.npy").string();
    write_npy(path, t);
    const HostTensor back = read_npy(path);
    ASSERT_EQ(back.type(), t.type());
    ASSERT_EQ(back.nbytes(), t.nbytes());
    if (t.nbytes()) {
      EXPECT_EQ(std::memcmp(back.data(), t.data(), t.nbytes()), 0) << t.type().str();
    }
  }
}

TEST(Npy, NumPyReadsWhatKilnWritesAndKilnReadsNumPy) {
  const auto ours = scratch("ours.npy").string();
  const auto theirs = scratch("theirs.npy").string();
  write_npy(ours, HostTensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  const std::string script = "import numpy as np; a = np.load('" + ours +
                             "'); assert a.dtype == np.float32 and a.shape == (2, 3) and a[1, 2] == 6, a; "
                             "np.save('" + theirs + "', np.arange(5, dtype=np.int64).reshape(5, 1) * 3)";
  const std::string cmd = std::string(KILN_PYTHON) + " -c \"" + script + "\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const HostTensor t = read_npy(theirs);
  EXPECT_EQ(t.type().str(), "i64[5,1]");
  EXPECT_EQ(t.get_int(4), 12);
}

TEST(Npy, BadFilesGiveClearErrors) {
  const auto path = scratch("bad.npy").string();
  auto expect_error = [&](const std::string& bytes, const std::string& needle) {
    std::ofstream(path, std::ios::binary) << bytes;
    try {
      read_npy(path);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << "names the file: " << e.what();
    }
  };
  expect_error("hello", "not a .npy file");
  const HostTensor t = HostTensor::from_vector<float>({1, 2, 3, 4}, {4});
  write_npy(path, t);
  std::ifstream in(path, std::ios::binary);
  std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  expect_error(good.substr(0, good.size() - 3), "truncated data");
  std::string complex = good;
  complex.replace(complex.find("<f4"), 3, "<c8");
  expect_error(complex, "unsupported dtype '<c8'");
  std::string bad_shape = good;
  bad_shape.replace(bad_shape.find("(4,)"), 4, "(x4,)");
  expect_error(bad_shape, "bad shape");
  std::string huge = good;
  huge.replace(huge.find("(4,)"), 4, "(4294967296, 4294967296)");
  expect_error(huge, "does not fit");
  // Regression (issue 10): a 9-dim shape threw from Shape without naming the file.
  std::string nine = good;
  nine.replace(nine.find("(4,)"), 4, "(1,1,1,1,1,1,1,1,4)");
  expect_error(nine, "more than kiln's maximum of 8 dimensions");
  std::string fortran = good;
  fortran.replace(fortran.find("False"), 5, "True ");
  expect_error(fortran, "Fortran-order");
  EXPECT_THROW(read_npy(scratch("missing.npy").string()), Error);
}

}  // namespace
}  // namespace kiln
