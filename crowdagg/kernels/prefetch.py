"""A software prefetch for the compiled kernels: ``prefetch(arr, i)`` asks the CPU to bring ``arr[i]``'s cache line in.

Message passing on a sparse random graph reads a per-worker (or per-answer)
value for every answer at a random place: a few MB of workers fit in the
caches, but 2.5M workers (10M answers) do not, and each read then waits on
memory.  The reads of the next answers are known in advance (their worker
codes lie ahead in a sequential array), so a kernel asks for them some
answers early and the waits overlap.  A prefetch is a hint (it never
faults, whatever the address, and changes no value): the kernels compute
the same bits with it.  ``arr`` is a 1-D array; ``i`` any integer (the
address ``arr.ctypes.data + i * itemsize`` need not lie inside it).
"""

from __future__ import annotations

from typing import Any

import llvmlite
from llvmlite import binding, ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: LLVM's name of the intrinsic: pointers are opaque from LLVM 17 (llvmlite may enable them earlier).
_NAME = "llvm.prefetch.p0" if getattr(llvmlite, "opaque_pointers_enabled", binding.llvm_version_info[0] >= 17) \
    else "llvm.prefetch.p0i8"


@intrinsic
def prefetch(typingctx: Any, arr: Any, idx: Any) -> Any:  # pragma: no cover - compiled
    """Prefetch (read, high locality) the line holding ``arr[idx]`` of a 1-D array."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1 and isinstance(idx, types.Integer)):
        return None
    sig = types.void(arr, idx)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        aryty, idxty = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        i = context.cast(builder, args[1], idxty, types.intp)
        ptr = builder.gep(ary.data, [i])
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                            _NAME)
        # (address, read = 0, locality 3 = keep in every cache level, data cache = 1)
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


__all__ = ["prefetch"]
