"""DLPack tensors that claim to live on a CUDA device, for testing argument checks without a GPU.

The launcher checks every argument before touching memory or the driver, so a tensor whose
device says ``cuda:0`` but whose data is a small host buffer exercises every check on a CPU-only
machine (a call that passes them all then fails cleanly: no NVIDIA driver here).
"""

from __future__ import annotations

import ctypes

kDLCUDA = 2


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))),
]

_DTYPES = {
    "float16": (2, 16),
    "bfloat16": (4, 16),
    "float32": (2, 32),
    "float64": (2, 64),
    "int32": (0, 32),
    "int64": (0, 64),
    "int8": (0, 8),
    "uint8": (1, 8),
}
_KEEP: list = []  # keep every fake alive for the test session: the deleter is a no-op

_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


@ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
def _noop_deleter(_):
    return None


class FakeCudaTensor:
    """An object speaking the DLPack protocol for a tensor on ``cuda:device`` (data never read)."""

    def __init__(self, shape, dtype="float32", *, device=0, device_type=kDLCUDA, strides=None, address=1 << 20):
        code, bits = _DTYPES[dtype]
        self.shape_arr = (ctypes.c_int64 * len(shape))(*shape)
        self.strides_arr = (ctypes.c_int64 * len(shape))(*strides) if strides is not None else None
        m = DLManagedTensor()
        m.dl_tensor.data = address
        m.dl_tensor.device = DLDevice(device_type, device)
        m.dl_tensor.ndim = len(shape)
        m.dl_tensor.dtype = DLDataType(code, bits, 1)
        m.dl_tensor.shape = self.shape_arr
        m.dl_tensor.strides = self.strides_arr if strides is not None else None
        m.dl_tensor.byte_offset = 0
        m.deleter = _noop_deleter
        self.managed = m
        self.device = (device_type, device)
        _KEEP.append(self)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, **kwargs):
        return _PyCapsule_New(ctypes.addressof(self.managed), b"dltensor", None)
