"""fanout's tensor client for Python: NumPy arrays to and from a RedisAI-compatible database.

    from fanout_tensor_client import Client
    c = Client()                      # SSDB / SR_DB_TYPE / SR_DB_PASSWORD, as SmartRedis
    c.put_tensor("x", numpy.arange(6, dtype=numpy.float32).reshape(2, 3))
    y = c.get_tensor("x", numpy.float32, (2, 3))

Arrays must be C-contiguous; nothing is copied on the way in, and unpack_tensor fills an array in place.
"""
from ._native import API_VERSION, Client, monotonic_ns

__all__ = ["API_VERSION", "Client", "monotonic_ns"]
