"""Which requests the service logs (``serving.sample_fraction``) and each caller's
client key: keyed hashes under the sample store's secret."""

from __future__ import annotations

import hashlib
import hmac

from driftgate.stores._sql import (
    single_value_table,
)
from driftgate.stores.sample_tables import CLIENT_KEY_CHARS

# -- sampling (serving.sample_fraction) -----------------------------------------------
#
# Which requests are logged is decided by a *keyed* hash of the request id. The id is
# the client's own (X-Request-ID): with a hash anyone can compute, a client could pick
# ids that are never logged and keep its traffic out of every drift check. The key is
# a random secret made by the first process that opens the sample store and kept in
# its database, so every process that writes or joins this store (replicas, restarts,
# `driftgate labels load`) decides alike, and no operator has to distribute it. Whoever
# can read the key can read the samples themselves; it is never logged or printed.
SAMPLING_KEY_TABLE = "driftgate_sampling_key"
sampling_key_table = single_value_table(SAMPLING_KEY_TABLE, "secret")  # 32 bytes, hex


class RequestSampling:
    """Whether a request is logged at ``fraction``: HMAC-SHA256 of its id under the
    store's key, read as a number in [0, 1), below ``fraction``.

    The same id gets the same answer in every process sharing the store (a retried
    request is logged or skipped alike), a smaller fraction keeps a subset of a larger
    one, and without the key no client can tell which of its ids will be logged.
    """

    __slots__ = ("_keyed", "_threshold", "fraction")

    def __init__(self, key: bytes, fraction: float) -> None:
        if len(key) < 16:
            raise ValueError("a sampling key needs at least 16 bytes")
        self.fraction = float(fraction)
        self._keyed = hmac.new(key, digestmod=hashlib.sha256)  # copied per id: no re-keying
        self._threshold = self.fraction * 2.0**64

    def keeps(self, request_id: str) -> bool:
        if self.fraction >= 1.0:
            return True
        keyed = self._keyed.copy()
        keyed.update(request_id.encode("utf-8", "surrogatepass"))
        return int.from_bytes(keyed.digest()[:8], "big") < self._threshold

    def client_key(self, identity: str) -> str:
        """The caller's short opaque key: HMAC-SHA256 of ``identity`` (a peer address or
        a header's value) under the store's key, as CLIENT_KEY_CHARS hex characters.
        Stored instead of the address (privacy); the same caller gets the same key in
        every process sharing the store, and without the key nobody can map a key back
        to an address by hashing candidates. Domain-separated from the sampling hash,
        so a key says nothing about which request ids are logged."""
        keyed = self._keyed.copy()
        keyed.update(b"client\0" + identity.encode("utf-8", "surrogatepass"))
        return keyed.hexdigest()[:CLIENT_KEY_CHARS]

    def __repr__(self) -> str:  # never the key
        return f"RequestSampling(fraction={self.fraction:g})"
