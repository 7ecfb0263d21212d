// ir/npy.cpp - reading and writing NumPy .npy files.
#include "kiln/ir/npy.h"

#include <fstream>
#include <iterator>

#include <fmt/format.h>

namespace kiln {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

std::string_view descr_of(DType t) {
  switch (t) {
    case DType::Bool: return "|b1";
    case DType::I8: return "|i1";
    case DType::I16: return "<i2";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
    case DType::U8: return "|u1";
    case DType::U16: return "<u2";
    case DType::U32: return "<u4";
    case DType::U64: return "<u8";
    case DType::F16: return "<f2";
    case DType::F32: return "<f4";
    case DType::F64: return "<f8";
    case DType::BF16: break;  // NumPy has no bfloat16
  }
  return "";
}

// The value after `'key':` in the header dict, up to the next ',' at depth 0 or '}'.
std::string dict_value(const std::string& header, const std::string& key) {
  const size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) return {};
  size_t p = header.find(':', k);
  if (p == std::string::npos) return {};
  ++p;
  int depth = 0;
  size_t end = p;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
  }
  std::string v = header.substr(p, end - p + (header[end] == ')' ? 1 : 0));
  const auto first = v.find_first_not_of(" \t"), last = v.find_last_not_of(" \t");
  return first == std::string::npos ? std::string() : v.substr(first, last - first + 1);
}

}  // namespace

HostTensor read_npy(const std::string& path) {
  auto fail = [&](const std::string& why) { return Error(fmt::format("{}: error: {}", path, why)); };
  std::ifstream in(path, std::ios::binary);
  if (!in) throw fail("cannot open file");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0) throw fail("not a .npy file (bad magic)");
  const auto major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw fail("truncated header");
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + static_cast<size_t>(i)])) << (8 * i);
    header_start = 12;
  } else {
    throw fail(fmt::format("unsupported .npy version {}", major));
  }
  if (header_start + header_len > bytes.size()) throw fail("truncated header");
  const std::string header = bytes.substr(header_start, header_len);

  std::string descr = dict_value(header, "descr");
  if (descr.size() < 2) throw fail("header has no 'descr'");
  descr = descr.substr(1, descr.size() - 2);  // strip quotes
  std::optional<DType> dtype;
  for (DType t : kAllDTypes)
    if (!descr_of(t).empty() && (descr == descr_of(t) || (descr.size() == 3 && descr[0] == '=' && descr.substr(1) == descr_of(t).substr(1))))
      dtype = t;
  if (!dtype)
    throw fail(fmt::format("unsupported dtype '{}' (kiln reads little-endian f2, f4, f8, i1-i8, u1-u8 and b1)", descr));
  if (dict_value(header, "fortran_order") != "False")
    throw fail("Fortran-order arrays are not supported; save with numpy.ascontiguousarray");

  const std::string shape_text = dict_value(header, "shape");
  if (shape_text.size() < 2 || shape_text.front() != '(') throw fail("header has no 'shape'");
  Shape shape;
  size_t p = 1;
  while (p < shape_text.size()) {
    while (p < shape_text.size() && (shape_text[p] == ' ' || shape_text[p] == ',')) ++p;
    if (p >= shape_text.size() || shape_text[p] == ')') break;
    size_t used = 0;
    int64_t d = -1;
    try {
      d = std::stoll(shape_text.substr(p), &used);
    } catch (const std::exception&) {
      throw fail("bad shape " + shape_text);
    }
    if (used == 0 || d < 0) throw fail("bad shape " + shape_text);
    if (shape.rank() == Shape::kMaxRank)
      throw fail(fmt::format("shape {} has more than kiln's maximum of {} dimensions", shape_text, Shape::kMaxRank));
    shape.push_back(d);
    p += used;
  }
  const auto numel = checked_numel(shape);
  if (!numel || *numel > static_cast<int64_t>(bytes.size()))
    throw fail(fmt::format("shape {} does not fit in the file's {} bytes", shape.str(), bytes.size()));
  HostTensor t(TensorType{*dtype, shape});
  const size_t data_start = header_start + header_len;
  if (bytes.size() - data_start < t.nbytes())
    throw fail(fmt::format("truncated data: {} needs {} bytes, the file has {}", t.type().str(),
                           t.nbytes(), bytes.size() - data_start));
  if (t.nbytes()) std::memcpy(t.data(), bytes.data() + data_start, t.nbytes());  // empty: data() is null
  return t;
}

void write_npy(const std::string& path, const HostTensor& t) {
  if (descr_of(t.dtype()).empty())
    throw Error(fmt::format("{}: NumPy has no {} arrays (cast to f32 first)", path, dtype_name(t.dtype())));
  const auto dims = t.shape().dims();
  const std::string shape = dims.size() == 1 ? fmt::format("({},)", dims[0])
                                             : fmt::format("({})", fmt::join(dims, ", "));
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                   descr_of(t.dtype()), shape);
  // Pad with spaces so that magic + lengths + header + '\n' is a multiple of 64.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error(fmt::format("{}: error: cannot write file", path));
  out.write(kMagic, 6);
  const char version[2] = {1, 0};
  out.write(version, 2);
  const char len[2] = {static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
  out.write(len, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(t.nbytes()));
  if (!out) throw Error(fmt::format("{}: error: write failed", path));
}

}  // namespace kiln
