"""Sans-I/O wire protocol shared by the Hub, the CLI and the MCP server (DESIGN.md §3, §6, §8).

Nothing in this package touches a socket or a file: it turns bytes into frames and
messages and back, and holds the rules every frontend shares.  On the request
path, a frontend builds params (:mod:`protocol.requests`), the client's
:class:`protocol.connection.ClientConnection` frames them
(:mod:`protocol.messages`, :mod:`protocol.framing`), and the Hub validates
them (:mod:`protocol.params`, :mod:`protocol.paths`).  Also here: where a
Hub is (:mod:`protocol.endpoint`), the bounds (:mod:`protocol.limits`), the
closed set of errors (:mod:`protocol.errors`) and the agent protocol text
(:mod:`protocol.agent_protocol`).
"""

from amux_memory.protocol.errors import ErrorCode, HubError
from amux_memory.protocol.framing import FrameDecoder, encode_frame
from amux_memory.protocol.limits import LIMITS, Limits

__all__ = ["ErrorCode", "HubError", "FrameDecoder", "encode_frame", "LIMITS", "Limits"]
