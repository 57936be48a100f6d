// tl_aot launcher runtime, image packs: images kept in one file per arch beside the library, each
// read on its entry's first call, checked by SHA-256 and bound to the library by its build id.
//
// Reference (embedded in the library in place of an image), little-endian:
//   "TLAOTRF1", u32 stored size, u8[32] SHA-256 of the stored image, u8[32] build id,
//   then three NUL-terminated strings: the arch label (sm_90a), the pack's file name, the install hint.
// Pack file (lib<name>.<label>.tlpack, written by tl_aot/pipeline/image_packs.py):
//   "TLAOTPK1", u32 version (1), u32 count, u8[32] build id, char[16] label,
//   count rows (u8[32] SHA-256, u64 offset, u64 size) sorted by SHA-256, then the stored images.
// One stored image serves every entry whose image has its bytes (stored once, by content).
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tl_aot/launcher_runtime.h"

namespace tl_aot {
namespace rt {
inline namespace v4 {

namespace {

constexpr char kRefMagic[8] = {'T', 'L', 'A', 'O', 'T', 'R', 'F', '1'};
constexpr char kPackMagic[8] = {'T', 'L', 'A', 'O', 'T', 'P', 'K', '1'};
constexpr size_t kRefHead = 8 + 4 + 32 + 32;
constexpr size_t kPackHead = 8 + 4 + 4 + 32 + 16;
constexpr size_t kRow = 32 + 8 + 8;

// ---- SHA-256 (FIPS 180-4), for checking an image read from a pack ---------------------------------
struct Sha256 {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  unsigned char buf[64];
  size_t fill = 0;
  uint64_t bits = 0;

  static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

  void block(const unsigned char* p) {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
        0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
        0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
        0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
        0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
        0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
        0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = (uint32_t(p[4 * i]) << 24) | (uint32_t(p[4 * i + 1]) << 16) | (uint32_t(p[4 * i + 2]) << 8) | p[4 * i + 3];
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
  }

  void update(const unsigned char* p, size_t n) {
    bits += uint64_t(n) * 8;
    while (n > 0) {
      size_t take = std::min(n, sizeof(buf) - fill);
      std::memcpy(buf + fill, p, take);
      fill += take, p += take, n -= take;
      if (fill == sizeof(buf)) block(buf), fill = 0;
    }
  }

  void digest(unsigned char out[32]) {
    uint64_t total = bits;
    unsigned char pad = 0x80;
    update(&pad, 1);
    pad = 0;
    while (fill != 56) update(&pad, 1);
    for (int i = 7; i >= 0; --i) buf[56 + (7 - i)] = static_cast<unsigned char>(total >> (8 * i));
    block(buf);
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<unsigned char>(h[i] >> (24 - 8 * j));
  }
};

uint64_t le(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string hex(const unsigned char* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) s += d[p[i] >> 4], s += d[p[i] & 15];
  return s;
}

// What a reference says.
struct Ref {
  uint64_t size;
  const unsigned char* digest;
  const unsigned char* build;
  std::string label, file, hint;
};

Ref parse_ref(const char* data) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(data);
  Ref r;
  r.size = le(p + 8, 4);
  r.digest = p + 12;
  r.build = p + 44;
  const char* s = data + kRefHead;
  r.label = s;
  s += r.label.size() + 1;
  r.file = s;
  s += r.file.size() + 1;
  r.hint = s;
  return r;
}

// A pack's header and index, read once per file (read again if the file there changes).
struct Pack {
  std::string identity;             // the header and the file's size: one build id, one content
  std::string build;                // 32 bytes
  std::vector<unsigned char> rows;  // count rows of kRow bytes, sorted by digest
  size_t count = 0;
};

std::mutex g_pack_mutex;
std::map<std::string, Pack>* g_packs = nullptr;  // path -> index (never freed: the library's lifetime)

// The folder of the library this runtime is linked into ("" if unknown).
std::string library_folder() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&is_pack_ref), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// What to do: install (or, for a damaged pack, reinstall) the pack the library was built with.
std::string install_note(const Ref& r, bool again = false) {
  if (r.hint.empty()) return "copy " + r.file + " from the build's output folder beside the library" + (again ? " again" : "");
  return (again ? "reinstall it: " : "install it: ") + r.hint;
}

// The index of the pack at `path`, checked against the reference's build; nullptr with `why` set.
const Pack* open_pack(const std::string& path, const Ref& r, std::string* why) {
  if (g_packs == nullptr) g_packs = new std::map<std::string, Pack>();
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    g_packs->erase(path);
    *why = "its " + r.label + " kernels are in " + r.file + ", which is not installed (looked for " + path + "); " +
           install_note(r);
    return nullptr;
  }
  // The header and the size say which file this is (a pack's build id fixes its content), so a
  // pack replaced since it was read is read again; no stat (its glibc 2.33 symbol would raise the wheel's tag).
  unsigned char head[kPackHead];
  bool ok = std::fread(head, 1, kPackHead, f) == kPackHead && std::memcmp(head, kPackMagic, 8) == 0 &&
            le(head + 8, 4) == 1 && std::fseek(f, 0, SEEK_END) == 0;
  std::string identity = ok ? std::string(reinterpret_cast<const char*>(head), kPackHead) + std::to_string(std::ftell(f)) : "";
  auto it = g_packs->find(path);
  if (it != g_packs->end() && (!ok || it->second.identity != identity)) {
    g_packs->erase(it);
    it = g_packs->end();
  }
  if (ok && it == g_packs->end()) {
    Pack pack;
    pack.identity = identity;
    pack.count = le(head + 12, 4);
    pack.build.assign(reinterpret_cast<const char*>(head + 16), 32);
    pack.rows.resize(pack.count * kRow);
    ok = std::fseek(f, static_cast<long>(kPackHead), SEEK_SET) == 0 &&
         std::fread(pack.rows.data(), 1, pack.rows.size(), f) == pack.rows.size();
    if (ok) it = g_packs->emplace(path, std::move(pack)).first;
  }
  std::fclose(f);
  if (!ok) {
    *why = path + " is not a tl_aot image pack or is truncated; " + install_note(r, true);
    return nullptr;
  }
  const Pack& pack = it->second;
  if (std::memcmp(pack.build.data(), r.build, 32) != 0) {
    *why = path + " belongs to another build (its build id " +
           hex(reinterpret_cast<const unsigned char*>(pack.build.data()), 6) + ", this library's " + hex(r.build, 6) +
           ": built from another record or toolchain), so none of its images is loaded; " + install_note(r);
    g_packs->erase(it);  // a reinstalled pack is read again
    return nullptr;
  }
  return &pack;
}

}  // namespace

bool is_pack_ref(const char* data) { return data != nullptr && std::memcmp(data, kRefMagic, 8) == 0; }

std::string pack_ref_label(const char* ref) { return parse_ref(ref).label; }

std::string packed_image(const char* ref, std::string* why) {
  Ref r = parse_ref(ref);
  std::lock_guard<std::mutex> lock(g_pack_mutex);
  std::string folder = library_folder();
  std::string path = (folder.empty() ? std::string(".") : folder) + "/" + r.file;
  const Pack* pack = open_pack(path, r, why);
  if (pack == nullptr) return "";
  // The first row not below the image's digest (the index is sorted by digest).
  size_t lo = 0, hi = pack->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (std::memcmp(pack->rows.data() + mid * kRow, r.digest, 32) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo >= pack->count || std::memcmp(pack->rows.data() + lo * kRow, r.digest, 32) != 0) {
    *why = path + " lacks the image " + hex(r.digest, 6) + " this library was built with (the pack is damaged); " +
           install_note(r, true);
    return "";
  }
  const unsigned char* row = pack->rows.data() + lo * kRow;
  uint64_t offset = le(row + 32, 8), size = le(row + 40, 8);
  std::string bytes(size, '\0');
  FILE* f = std::fopen(path.c_str(), "rb");
  bool ok = f != nullptr && size == r.size && std::fseek(f, static_cast<long>(offset), SEEK_SET) == 0 &&
            std::fread(&bytes[0], 1, size, f) == size;
  if (f != nullptr) std::fclose(f);
  unsigned char got[32];
  if (ok) {
    Sha256 h;
    h.update(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
    h.digest(got);
    ok = std::memcmp(got, r.digest, 32) == 0;
  }
  if (!ok) {
    *why = path + ": the image " + hex(r.digest, 6) + " read back differs from the one built (the file is damaged); " +
           install_note(r, true);
    return "";
  }
  return bytes;
}

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot
