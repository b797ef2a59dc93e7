// Memory-mapped safetensors files and the small writer tests use to make them.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "mla/loader/safetensors.h"

namespace mla::loader {
namespace {

constexpr const char* kOp = "safetensors";
// Headers of real checkpoints are a few hundred KB; anything near this is a corrupt length field.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

SafetensorsFile::~SafetensorsFile() {
  if (map_) munmap(map_, map_size_);
}

Status SafetensorsFile::open(const std::string& path, std::shared_ptr<SafetensorsFile>* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::io(kOp, "cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::io(kOp, path + ": not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return Status::invalid(kOp,
                           path + ": " + std::to_string(size) + " bytes, too short for a header (truncated file?)");
  }
  void* m = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file referenced
  if (m == MAP_FAILED) return Status::io(kOp, "cannot mmap " + path + ": " + std::strerror(errno));
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->map_ = m;
  f->map_size_ = size;
  const auto* bytes = static_cast<const uint8_t*>(m);
  const uint64_t header_len = read_le64(bytes);
  if (header_len > kMaxHeaderBytes || header_len > size - 8)
    return Status::invalid(kOp, path + ": header length " + std::to_string(header_len) + " exceeds the file size " +
                                    std::to_string(size) + " (truncated or corrupt file?)");
  f->data_ = bytes + 8 + header_len;
  const std::string_view header(reinterpret_cast<const char*>(bytes + 8), header_len);
  MLA_TRY(parse_safetensors_header(header, size - 8 - header_len, path, &f->tensors_, &f->metadata_));
  for (size_t i = 0; i < f->tensors_.size(); ++i) f->index_[f->tensors_[i].name] = i;
  *out = std::move(f);
  return Status::ok();
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

TensorView SafetensorsFile::view(const TensorInfo& t) const {
  TensorView v;
  v.data = const_cast<uint8_t*>(data_ + t.begin);
  v.dtype = t.dtype;
  v.rank = static_cast<int>(t.shape.size());
  int64_t stride = 1;
  for (int i = v.rank - 1; i >= 0; --i) {
    v.shape[i] = t.shape[i];
    v.stride[i] = stride;
    stride *= t.shape[i];
  }
  return v;
}

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  size_t offset = 0;
  for (const auto& t : tensors) {
    size_t n = dtype_size(t.dtype);
    for (int64_t d : t.shape) n *= static_cast<size_t>(d);
    h[t.name] = {
        {"dtype", safetensors_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // keeps the data section 8-byte aligned
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::io(kOp, "cannot create " + path);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const auto& t : tensors) {
    size_t n = dtype_size(t.dtype);
    for (int64_t d : t.shape) n *= static_cast<size_t>(d);
    out.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(n));
  }
  out.close();
  if (!out) return Status::io(kOp, "write failed: " + path);
  return Status::ok();
}

}  // namespace mla::loader
