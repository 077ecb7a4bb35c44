"""Sans-I/O wire protocol shared by the Hub, the CLI and the MCP server.

Nothing in this package touches a socket or a file: it turns bytes into frames
and messages and back, and holds the rules every frontend shares (limits,
error codes).  Design record §3 (APIs) and §6 (bounds).
"""

from protocol.errors import ErrorCode, HubError
from protocol.framing import FrameDecoder, encode_frame
from protocol.limits import LIMITS, Limits

__all__ = ["ErrorCode", "HubError", "FrameDecoder", "encode_frame", "LIMITS", "Limits"]
