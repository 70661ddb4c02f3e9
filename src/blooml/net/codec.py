"""The wire codec: msgpack with lattice values as extension types, in a versioned envelope.

Never pickle: decoding builds only plain values (``None``, ``bool``, ``int``, ``float``,
``str``, ``bytes``, tuples, frozensets, dicts) and lattice values of *registered* classes,
through their validating constructors, so a datagram cannot run code, and a value a lattice
rejects (``lpset([-1])``) is an error, not a half-built value.

Values::

    data = encode(value)           # bytes
    value = decode(data)           # CodecError on anything malformed

Envelopes (what one datagram or TCP frame carries: all the tuples one tick sends to one
address)::

    data = encode_envelope("127.0.0.1:7000", [("vote", [row_bytes, ...]), ...], key=None)
    env = decode_envelope(data, key=None)   # Envelope(version, sender, ts, batches)

``batches`` take rows already encoded with :func:`encode_row`. With a cluster key the body
(sender, destination, sequence number, timestamp and rows) is signed with HMAC-SHA256, and a
receiver refuses a datagram unsigned, badly signed, addressed to another node, stale or
replayed (:class:`ReplayGuard`). User lattices: :func:`register`.

This module is the public face of two private ones, each one responsibility, and holds no
code of its own:

* :mod:`blooml.net._valuecodec`, the **value codec**: values, rows and lattices to bytes and
  back (``encode``, ``decode``, ``encode_row``, ``encode_fitting``, ``register``,
  ``registered``); it changes when a value type is added.
* :mod:`blooml.net._envelope`, the **envelope**: framing, signing and checking the message
  around the encoded rows, its size limits and the replay guard (``encode_envelope``,
  ``envelope_head``, ``encode_envelope_after``, ``decode_envelope``, ``Envelope``,
  ``ReplayGuard``, ``split_outer``, ``encode_for_channel``, ``FORMAT_VERSION``,
  ``MAX_DATAGRAM``, ``MAX_MESSAGE``, ``ENVELOPE_SLACK``); it changes when the format or its
  authentication does. It imports the value codec; the value codec never imports it.

Every name importable from here before the two were split still is
(``tests/net/test_codec_names.py``).
"""

from __future__ import annotations

# The names of ``__all__`` are imported plainly; the other public names, outside ``__all__``
# as they were before the split, as ``X as X``, which marks each one re-exported.
from blooml.errors import CodecError as CodecError
from blooml.net._envelope import (
    ENVELOPE_SLACK,
    FORMAT_VERSION,
    MAX_DATAGRAM,
    MAX_MESSAGE,
    Envelope,
    decode_envelope,
    encode_envelope,
    encode_for_channel,
)
from blooml.net._envelope import Destination as Destination
from blooml.net._envelope import ReplayGuard as ReplayGuard
from blooml.net._envelope import encode_envelope_after as encode_envelope_after
from blooml.net._envelope import envelope_head as envelope_head
from blooml.net._envelope import split_outer as split_outer
from blooml.net._valuecodec import MAX_ENCODE_DEPTH as MAX_ENCODE_DEPTH
from blooml.net._valuecodec import MAX_EXT_DEPTH as MAX_EXT_DEPTH
from blooml.net._valuecodec import decode, encode, encode_row, register, registered
from blooml.net._valuecodec import encode_fitting as encode_fitting

__all__ = [
    "ENVELOPE_SLACK",
    "FORMAT_VERSION",
    "MAX_DATAGRAM",
    "MAX_MESSAGE",
    "Envelope",
    "decode",
    "decode_envelope",
    "encode",
    "encode_envelope",
    "encode_for_channel",
    "encode_row",
    "register",
    "registered",
]
