// Part of tl_aot's launcher runtime (tl_aot/launcher_runtime.h includes every part in order):
// images kept outside the library, in one pack file per arch beside it (docs/wheels.md).
//
// A library built with image packs embeds, in place of each image, a small reference: the
// SHA-256 of the stored image, the library's build id, the pack's file name and what to install
// when it is missing. On an entry's first call the image is read from the pack (only that image),
// checked against its digest and loaded; a pack of another build (another record or toolchain)
// is refused by its build id before any image of it is read.
#ifndef TL_AOT_RUNTIME_PACKS_H_
#define TL_AOT_RUNTIME_PACKS_H_

#include <string>

namespace tl_aot {
namespace rt {
inline namespace v4 {

// Whether an image table's `data` is a reference to an image in a pack (not the image itself).
bool is_pack_ref(const char* data);

// The bytes of the image `ref` points at, read from its pack and checked; on failure "" with the
// message in `*why` (naming the file and what to install).
std::string packed_image(const char* ref, std::string* why);

// The arch label of a reference ("sm_90a"), for messages and tl_aot_check_images.
std::string pack_ref_label(const char* ref);

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot

#endif  // TL_AOT_RUNTIME_PACKS_H_
