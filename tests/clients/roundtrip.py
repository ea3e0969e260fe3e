"""The Python client's round trip (language_clients_test), as roundtrip.c: every dtype, shapes [7], [3,4],
[2,3,5], elements i % 100; put_tensor from the array's own buffer, unpack_tensor into an array in place."""
import sys

import numpy as np
from fanout_tensor_client import Client

DTYPES = [np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16]  # enum order 1..8
prefix = sys.argv[1]
c = Client()
count = 0
for code, dtype in enumerate(DTYPES, start=1):
    for shape in [(7,), (3, 4), (2, 3, 5)]:
        a = (np.arange(int(np.prod(shape))) % 100).astype(dtype).reshape(shape)
        key = f"{prefix}_{code}_{len(shape)}"
        c.put_tensor(key, a)
        b = np.zeros_like(a)
        c.unpack_tensor(key, b)
        assert np.array_equal(a, b), key
        assert np.array_equal(c.get_tensor(key, dtype, shape), a), key
        count += 1
try:
    c.unpack_tensor(f"{prefix}_1_1", np.zeros(7, dtype=np.float64))
    sys.exit("a FLOAT tensor was unpacked as DOUBLE")
except RuntimeError as e:
    assert str(e), "an error without a reason"
try:
    c.put_tensor("x", np.zeros((4, 4), dtype=np.float32)[:, 1])  # a strided view is refused, not copied unseen
    sys.exit("a non-contiguous array was accepted")
except ValueError:
    pass
print(f"ok {count}")
