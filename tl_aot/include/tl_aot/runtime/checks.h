// Part of tl_aot's launcher runtime (tl_aot/launcher_runtime.h includes every part in order):
// a call's frame and the tables that check its arguments, the checker, a call's run.
#ifndef TL_AOT_RUNTIME_CHECKS_H_
#define TL_AOT_RUNTIME_CHECKS_H_

#include <tvm/ffi/c_api.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>

#include <cstdint>

#include "tl_aot/runtime/modules.h"

namespace tl_aot {
namespace rt {
inline namespace v4 {

// DLTensor view of a TensorView (the C++ API takes TensorViews).
inline DLTensor as_dltensor(const ::tvm::ffi::TensorView& v) {
  DLTensor t;
  t.data = v.data_ptr();
  t.device = v.device();
  t.ndim = static_cast<int32_t>(v.ndim());
  t.dtype = v.dtype();
  t.shape = const_cast<int64_t*>(v.shape().data());
  t.strides = const_cast<int64_t*>(v.strides().data());
  t.byte_offset = v.byte_offset();
  return t;
}

// ----------------------------------------------------------------------------------------------
// A call's arguments and the tables that check them. Each generated entry describes its
// parameters as constexpr data (which dims bind or must equal which value, dtypes, strides,
// alignment, how to read the TVM FFI arguments); one checker reads the tables, in the order the
// errors are reported: every input tensor, the devices, the symbols, the dims given by
// expressions, the outputs (allocated or checked), then data pointers and strides. Nothing is
// launched before every check passed; nothing here locks or builds a string unless it fails.
// ----------------------------------------------------------------------------------------------
union Scalar {
  int64_t i;  // integers and bool
  double f;   // float32 / float64
};

// One call's values: tensors (inputs, then outputs), their data, dynamic symbols, scalar
// parameters, outputs the call allocated. Storage is an entry's Args.
struct Frame {
  const DLTensor** t;
  void** p;
  int64_t* s;
  Scalar* a;
  ::tvm::ffi::Tensor* o;
};

// A frame's start (arrays zeroed, `no` empty outputs) and end (the outputs released): out of
// line, one call each instead of code inlined at every call site of every entry.
void start_frame(Frame& x, int nt, int ns, int na, int no);
void end_frame(Frame& x, int no);

// An entry's call storage: NT tensors, NS symbols, NA scalars, NO outputs.
template <int NT, int NS, int NA, int NO>
struct Args : Frame {
  Args() : Frame{t_, p_, s_, a_, reinterpret_cast<::tvm::ffi::Tensor*>(o_)} { start_frame(*this, NT, NS, NA, NO); }
  ~Args() { end_frame(*this, NO); }
  Args(const Args&) = delete;
  Args& operator=(const Args&) = delete;
  DLTensor dl[NT];  // the C++ API's tensors, viewed as DLTensors
  const DLTensor* t_[NT];
  void* p_[NT];
  int64_t s_[NS + 1];
  Scalar a_[NA + 1];
  alignas(::tvm::ffi::Tensor) unsigned char o_[sizeof(::tvm::ffi::Tensor) * (NO + 1)];
};

// A value the checker compares with: a constant, a symbol (slot n of Frame::s), or expression n
// of the entry's Checks::eval (over symbols and scalars, evaluated only when reached).
enum ValueKind : int8_t { kConst, kSymbol, kExpr };
struct Value {
  ValueKind kind;
  int64_t n;
};
using EvalFn = int64_t (*)(const Frame& x, int i);

// One dim of a tensor in its own check: not checked there (kSkip: a dim given by an expression,
// checked once every symbol is bound, or solved into a symbol), the binding of symbol value.n, or
// a value it must equal (`expected` then, for a symbol, its value and `source`, make the error).
enum DimKind : int8_t { kSkip, kBind, kEqual };
struct Dim {
  DimKind kind;
  Value value;
  const char* expected;
  const char* source;
};

// A DLPack dtype spelling a tensor may have (bool and float8 have two).
struct DType {
  uint8_t code;
  uint8_t bits;
};

struct TensorSpec {
  const char* name;
  int ndim;
  const char* shape;  // as errors show it: [m, 256]
  const char* dtype;  // float16
  DType dtypes[2];
  int num_dtypes;
  const Dim* dims;            // ndim of them
  const Value* strides;       // ndim of them; null: any strides
  const char* strides_shown;  // (256, 1)
  int alignment;              // bytes the data must be aligned to; 0: none
  DLDataType alloc_dtype;     // an output the call allocates: its dtype and shape
  const Value* alloc_shape;
  int alloc_ndim;
  // A sub-byte tensor (int4, float4_e2m1fn), bound as TileLang's host code binds it: packed storage
  // of any DLPack dtype of `packed_bits` bits (bits x lanes: int8, uint8, float4_e2m1fn_x2 for
  // 4-bit types), whose last dim holds `pack` elements each. Dims, strides and symbols are checked
  // as the logical tensor's (logical_dim); the last stride is the storage's. 0: whole bytes.
  int packed_bits = 0;
  int pack = 1;
};

// Dim d of tensor t as the kernel sees it: a packed tensor's last dim counts its sub-byte elements.
inline int64_t logical_dim(const TensorSpec& ts, const DLTensor* t, int d) {
  return d == ts.ndim - 1 ? t->shape[d] * ts.pack : t->shape[d];
}

// What errors show of a tensor: 0 for whole bytes, else the elements each storage element packs.
inline int shown_pack(const TensorSpec& ts) {
  return ts.packed_bits != 0 ? ts.pack : 0;
}

// A dynamic symbol: bound by a dim of tensor `tensor` (derive < 0) and checked in [1, max], or
// solved from that dim by expression `derive` and checked exact: the dim recomputed (`check`).
struct SymbolSpec {
  const char* name;
  int tensor;
  int dim;
  int64_t max;
  int derive;
  Value check;
  const char* expected;
};

// A dim given by an expression over the symbols: checked once every symbol is bound.
struct LateCheck {
  int tensor;
  int dim;
  Value value;
  const char* expected;
};

// How one TVM FFI argument is read: a tensor (into Frame::t[index]) or a scalar (Frame::a[index]),
// an integer in [lo, hi] of `dtype`, a float or a bool.
enum ArgKind : int8_t { kTensorArg, kIntArg, kFloatArg, kBoolArg };
struct ArgRead {
  const char* name;
  ArgKind kind;
  int index;
  int64_t lo;
  int64_t hi;
  const char* dtype;
};

// A call form: every parameter, or (for an entry with outputs) the inputs alone.
struct Form {
  const ArgRead* reads;
  int count;
  const char* names;  // as an argument-count error lists them
};

struct Checks {
  const TensorSpec* tensors;  // the inputs, then the outputs
  int num_tensors;
  int num_inputs;  // 0: no input tensor (the device is the current one, or the first output's)
  const SymbolSpec* symbols;
  int num_symbols;
  int num_scalars;
  const LateCheck* late;  // those of the inputs, then of the outputs
  int num_late_inputs;
  int num_late;
  EvalFn eval;  // null when no value is an expression
  Form every;
  Form inputs;    // inputs.reads null: no outputs, one form
  int decide_at;  // where a call of inputs + 1 arguments shows its form (see returns_outputs)
  bool decide_tensor;
};

// Check every argument of a call of `e` (with `alloc`, allocate its outputs); returns the device.
int check_args(const Entry& e, Frame& x, bool alloc);
// Which form a TVM FFI call takes (true: the inputs alone, outputs returned); `name` for errors.
bool call_form(const Entry& e, const ::tvm::ffi::AnyView* a, int32_t num_args, const char* name);
// Check, pick the stream, load on first use and launch the image for the device.
void run(const Entry& e, Frame& x, const ::tvm::ffi::AnyView* stream_view, bool has_stream, void* stream, bool alloc);
// A TVM FFI call of `e` in the given form: reads the arguments, runs, sets the result.
void invoke(const Entry& e, Frame& x, const ::tvm::ffi::AnyView* a, int32_t num_args, TVMFFIAny* result, bool alloc);

// The same on a frame of its own (on the stack; on the heap past 16 tensors, symbols or scalars).
void invoke(const Entry& e, const ::tvm::ffi::AnyView* a, int32_t num_args, TVMFFIAny* result, bool alloc);

}  // namespace v4
}  // namespace rt
}  // namespace tl_aot

#endif  // TL_AOT_RUNTIME_CHECKS_H_
