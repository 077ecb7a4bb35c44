"""What the Hub and its clients must agree on: the wire protocol and the rules every frontend shares
(DESIGN.md §3, §6, §8, §13.2).

Sans-I/O but for two reads: nothing here touches a socket;
:mod:`protocol.config_file` reads ``<AMUX_HOME>/config.toml`` (and resolves
the paths it names), and :mod:`protocol.version` asks
:mod:`importlib.metadata` for the installed version.  The rest turns bytes
into frames and messages and back, and states the rules.
On the request path, a frontend builds params (:mod:`protocol.requests`),
the client's :class:`protocol.connection.ClientConnection` frames them
(:mod:`protocol.messages`, :mod:`protocol.framing`), and the Hub validates
them (:mod:`protocol.params`, :mod:`protocol.paths`).  Also here: where a
Hub is (:mod:`protocol.endpoint`), the bounds (:mod:`protocol.limits`), the
closed set of errors (:mod:`protocol.errors`), the agent protocol text
(:mod:`protocol.agent_protocol`), every setting of ``config.toml`` with its
default, parser and help (:mod:`protocol.settings`), and the product's
version (:mod:`protocol.version`).
"""

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.framing import FrameDecoder, encode_frame
from amux_memory.protocol.limits import LIMITS, Limits

__all__ = ["ErrorCode", "HubError", "FrameDecoder", "encode_frame", "LIMITS", "Limits"]
