"""``bytes``: the control encoder. Byte embedding (257 x dim, 256 = BOS) -> shared backbone over
bytes -> 256-way next-byte head. No convolution, no merges, no patches: the floor every other
encoder is compared against at equal bytes."""

from encoders.byte_baseline.model import ByteConfig, ByteEncoder

__all__ = ["ByteConfig", "ByteEncoder"]
