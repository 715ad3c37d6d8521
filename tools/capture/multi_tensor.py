"""The kernel launches of a foreach op on a CUDA GPU, as PyTorch's multi_tensor_apply makes them.

An optimizer's `_foreach_*` op is one aten op over lists of tensors, but on a GPU it runs as a
series of kernels, each over a slice of the lists: each kernel gets at most 320 thread blocks of
65,536 elements and at most a few dozen tensors' addresses (fewer the more lists it reads), and a
tensor cut by a launch goes on in the next. The recorder on a GPU sees each launch as an op of its
own (a recorded GPT-2 small step: 7 launches per foreach op, each over 11 to 37 parameters), and
the executor acts between them. A capture that kept the op whole would make each of AdamW's
updates need all of its lists on the device at once; so the capture splits it the same way.

The limits are those of ATen's MultiTensorApply.cuh (PyTorch 2.x): `depth` is the number of
tensor lists the kernel reads or writes (an out-of-place op's results count as one), and ops with a
list of scalars leave less room for tensors.
"""

CHUNK_ELEMENTS = 65536
MAX_BLOCKS = 320
MAX_TENSORS = (110, 64, 48, 36, 30)
MAX_TENSORS_WITH_SCALAR_LIST = (96, 64, 48, 36, 30)


def launches(numels, depth, scalar_list=False):
    """The launches over tensors of `numels` elements (the lists' common lengths, in list order).

    Returns one list per launch of (tensor index, elements the launch processes of it), in
    order; empty tensors are in none, as on the GPU.
    """
    if not 1 <= depth <= len(MAX_TENSORS):
        raise ValueError(f"multi_tensor_apply takes 1 to {len(MAX_TENSORS)} tensor lists, not {depth}")
    max_tensors = (MAX_TENSORS_WITH_SCALAR_LIST if scalar_list else MAX_TENSORS)[depth - 1]
    out = []
    current = []  # [tensor index, elements] in the launch being filled
    blocks = 0
    for index, numel in enumerate(numels):
        if numel <= 0:
            continue
        current.append([index, 0])
        chunks = -(-numel // CHUNK_ELEMENTS)
        for chunk in range(chunks):
            current[-1][1] += min(CHUNK_ELEMENTS, numel - chunk * CHUNK_ELEMENTS)
            blocks += 1
            last_chunk = chunk == chunks - 1
            if (len(current) == max_tensors and last_chunk) or blocks == MAX_BLOCKS:
                out.append([tuple(entry) for entry in current])
                blocks = 0
                # A tensor cut by the launch is carried into the next one.
                current = [] if last_chunk else [[index, 0]]
    if blocks:
        out.append([tuple(entry) for entry in current])
    return out
