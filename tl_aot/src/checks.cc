// tl_aot launcher runtime, the argument checker: an entry's check tables read and applied, the
// call's form, its frame and its run (see Checks in launcher_runtime.h).
#include "tl_aot/launcher_runtime.h"

#include <cstring>
#include <new>
#include <utility>
#include <vector>

namespace tl_aot {
namespace rt {
inline namespace v4 {  // v4: TensorSpec holds packed sub-byte tensors (v3: Entry and EntrySlot, table-driven checks)

// ------------------------------------------------------------------------------------------------
// The argument checker (see Checks in the header): the tables of one entry, read in the order the
// generated checks had, so each bad argument gets the same error first.
// ------------------------------------------------------------------------------------------------
static inline int64_t value_of(const Value& v, const Frame& x, EvalFn eval) {
  if (v.kind == kConst) return v.n;
  if (v.kind == kSymbol) return x.s[v.n];
  return eval(x, static_cast<int>(v.n));
}

static inline bool dtype_ok(const TensorSpec& ts, DLDataType d) {
  if (ts.packed_bits != 0) return int(d.bits) * int(d.lanes) == ts.packed_bits;  // any code, as TileLang
  if (d.lanes != 1) return false;
  for (int i = 0; i < ts.num_dtypes; ++i)
    if (d.code == ts.dtypes[i].code && d.bits == ts.dtypes[i].bits) return true;
  return false;
}

// A tensor's own checks: on a CUDA device, rank, dtype, each dim (binding symbols); its data.
static void check_tensor(const char* entry, const TensorSpec& ts, Frame& x, int i) {
  const DLTensor* t = x.t[i];
  check_cuda_tensor(t, entry, ts.name);
  if (TL_AOT_UNLIKELY(t->ndim != ts.ndim)) bad_ndim(entry, ts.name, ts.ndim, ts.shape, t);
  if (TL_AOT_UNLIKELY(!dtype_ok(ts, t->dtype))) bad_dtype(entry, ts.name, ts.dtype, t);
  for (int d = 0; d < ts.ndim; ++d) {
    const Dim& dim = ts.dims[d];
    if (dim.kind == kBind) {
      x.s[dim.value.n] = logical_dim(ts, t, d);
    } else if (dim.kind == kEqual) {
      const int64_t want = dim.value.kind == kConst ? dim.value.n : x.s[dim.value.n];
      if (TL_AOT_UNLIKELY(logical_dim(ts, t, d) != want)) {
        if (dim.value.kind == kConst) bad_dim(entry, ts.name, dim.expected, t, shown_pack(ts));
        bad_dim_from(entry, ts.name, dim.expected, want, dim.source, t, shown_pack(ts));
      }
    }
  }
  x.p[i] = static_cast<char*>(t->data) + t->byte_offset;
}

static void check_late(const char* entry, const Checks& c, const Frame& x, int from, int to) {
  for (int k = from; k < to; ++k) {
    const LateCheck& l = c.late[k];
    const DLTensor* t = x.t[l.tensor];
    const TensorSpec& ts = c.tensors[l.tensor];
    const int64_t want = value_of(l.value, x, c.eval);
    if (TL_AOT_UNLIKELY(logical_dim(ts, t, l.dim) != want))
      bad_dim_from(entry, ts.name, l.expected, want, "", t, shown_pack(ts));
  }
}

static void check_symbols(const char* entry, const Checks& c, Frame& x) {
  for (int k = 0; k < c.num_symbols; ++k) {
    const SymbolSpec& s = c.symbols[k];
    const DLTensor* t = x.t[s.tensor];
    const TensorSpec& ts = c.tensors[s.tensor];
    if (s.derive >= 0) {  // solved from the dim as TileLang solves it; exact or refused
      const int64_t v = x.s[k] = c.eval(x, s.derive);
      if (TL_AOT_UNLIKELY(v <= 0 || v > s.max || logical_dim(ts, t, s.dim) != value_of(s.check, x, c.eval)))
        bad_dim(entry, ts.name, s.expected, t, shown_pack(ts));
    } else if (TL_AOT_UNLIKELY(x.s[k] <= 0 || x.s[k] > s.max)) {
      bad_symbol(entry, ts.name, s.dim, s.name, s.max, t, shown_pack(ts));
    }
  }
}

static void* alloc_output(const char* entry, const Checks& c, const TensorSpec& ts, Frame& x, int i, int device) {
  int64_t small[8];
  std::vector<int64_t> big;
  int64_t* shape = small;
  if (ts.alloc_ndim > 8) {
    big.resize(ts.alloc_ndim);
    shape = big.data();
  }
  for (int d = 0; d < ts.alloc_ndim; ++d) shape[d] = value_of(ts.alloc_shape[d], x, c.eval);
  return alloc_output(entry, ts.name, shape, ts.alloc_ndim, ts.alloc_dtype, device, &x.o[i - c.num_inputs], &x.t[i]);
}

static void check_layout(const char* entry, const Checks& c, const Frame& x) {
  for (int i = 0; i < c.num_tensors; ++i) {
    const TensorSpec& ts = c.tensors[i];
    check_data(entry, ts.name, x.p[i], ts.alignment);
    const int64_t* st = x.t[i]->strides;
    if (ts.strides == nullptr || st == nullptr) continue;
    const int64_t* sh = x.t[i]->shape;
    for (int d = 0; d < ts.ndim; ++d) {
      // a packed tensor's strides count storage elements: all but the last (1) times `pack` are the kernel's
      const int64_t scale = d == ts.ndim - 1 ? 1 : ts.pack;
      if (TL_AOT_UNLIKELY(sh[d] != 1 && st[d] * scale != value_of(ts.strides[d], x, c.eval)))
        bad_strides(entry, ts.name, ts.strides_shown, x.t[i]);
    }
  }
}

int check_args(const Entry& e, Frame& x, bool alloc) {
  const Checks& c = *e.checks;
  const char* entry = e.name;
  for (int i = 0; i < c.num_inputs; ++i) check_tensor(entry, c.tensors[i], x, i);
  const char* first = c.tensors[0].name;
  int device = c.num_inputs > 0 ? x.t[0]->device.device_id : 0;
  for (int i = 1; i < c.num_inputs; ++i)
    if (TL_AOT_UNLIKELY(x.t[i]->device.device_id != device))
      bad_device(entry, c.tensors[i].name, first, device, x.t[i]);
  check_symbols(entry, c, x);
  check_late(entry, c, x, 0, c.num_late_inputs);
  if (c.num_tensors > c.num_inputs) {
    if (alloc) {
      if (c.num_inputs == 0) device = current_device();
      for (int i = c.num_inputs; i < c.num_tensors; ++i) x.p[i] = alloc_output(entry, c, c.tensors[i], x, i, device);
    } else {
      for (int i = c.num_inputs; i < c.num_tensors; ++i) {
        check_tensor(entry, c.tensors[i], x, i);
        if (c.num_inputs == 0 && i == 0)  // no input tensor: the first output names the device
          device = x.t[i]->device.device_id;
        else if (TL_AOT_UNLIKELY(x.t[i]->device.device_id != device))
          bad_device(entry, c.tensors[i].name, first, device, x.t[i]);
      }
      check_late(entry, c, x, c.num_late_inputs, c.num_late);
    }
  }
  check_layout(entry, c, x);
  return device;
}

bool call_form(const Entry& e, const ::tvm::ffi::AnyView* a, int32_t num_args, const char* name) {
  const Checks& c = *e.checks;
  if (c.inputs.reads != nullptr)
    return returns_outputs(a, num_args, c.inputs.count, c.every.count, c.decide_at, c.decide_tensor, name,
                           c.inputs.names, c.every.names);
  if (TL_AOT_UNLIKELY(num_args != c.every.count && num_args != c.every.count + 1))
    bad_arg_count(name, c.every.count, c.every.names, num_args);
  return false;
}

void run(const Entry& e, Frame& x, const ::tvm::ffi::AnyView* stream_view, bool has_stream, void* stream_ptr,
         bool alloc) {
  const int device = check_args(e, x, alloc);
  const bool explicit_stream =
      has_stream || (stream_view != nullptr && stream_view->type_index() != ::tvm::ffi::TypeIndex::kTVMFFINone);
  CUstream stream = has_stream ? static_cast<CUstream>(stream_ptr) : stream_arg(stream_view, device, e.name);
  const Launching launching(*e.library, e, device, e.checks->tensors[0].name, stream);  // cleanup waits for it
  ContextGuard guard(e.name, g_devices[device].ctx);
  e.launches[launching.variant()](x, e.slots[device], stream, device, explicit_stream);
}

void invoke(const Entry& e, Frame& x, const ::tvm::ffi::AnyView* a, int32_t num_args, TVMFFIAny* result, bool alloc) {
  const Checks& c = *e.checks;
  const Form& form = alloc ? c.inputs : c.every;
  for (int k = 0; k < form.count; ++k) {
    const ArgRead& r = form.reads[k];
    switch (r.kind) {
      case kTensorArg:
        x.t[r.index] = tensor_arg(a[k], e.name, r.name);
        break;
      case kIntArg:
        x.a[r.index].i = int_arg(a[k], e.name, r.name, r.lo, r.hi, r.dtype);
        break;
      case kFloatArg:
        x.a[r.index].f = float_arg(a[k], e.name, r.name, r.dtype);
        break;
      case kBoolArg:
        x.a[r.index].i = bool_arg(a[k], e.name, r.name);
        break;
    }
  }
  run(e, x, num_args > form.count ? &a[form.count] : nullptr, false, nullptr, alloc);
  const int outputs = c.num_tensors - c.num_inputs;
  if (!alloc) {
    set_none(result);
  } else if (outputs == 1) {
    *result = ::tvm::ffi::details::AnyUnsafe::MoveAnyToTVMFFIAny(::tvm::ffi::Any(std::move(x.o[0])));
  } else {
    ::tvm::ffi::Array<::tvm::ffi::Tensor> outs;
    for (int k = 0; k < outputs; ++k) outs.push_back(std::move(x.o[k]));
    *result = ::tvm::ffi::details::AnyUnsafe::MoveAnyToTVMFFIAny(::tvm::ffi::Any(std::move(outs)));
  }
}

void start_frame(Frame& x, int nt, int ns, int na, int no) {
  std::memset(static_cast<void*>(x.t), 0, sizeof(*x.t) * nt);
  std::memset(static_cast<void*>(x.p), 0, sizeof(*x.p) * nt);
  std::memset(static_cast<void*>(x.s), 0, sizeof(*x.s) * (ns + 1));
  std::memset(static_cast<void*>(x.a), 0, sizeof(*x.a) * (na + 1));
  for (int i = 0; i < no; ++i) new (&x.o[i])::tvm::ffi::Tensor();
}

void end_frame(Frame& x, int no) {
  for (int i = 0; i < no; ++i) x.o[i].~Tensor();
}

const DLTensor* view(const ::tvm::ffi::TensorView& v, DLTensor* dl) {
  *dl = as_dltensor(v);
  return dl;
}

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot
