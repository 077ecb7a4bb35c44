"""How a client reports that it could not reach, or lost, the Hub: one wording (DESIGN.md §3, §8).

Every function returns a :class:`~protocol.errors.HubError` ``unavailable``
(exit status 11) whose ``data`` names the Hub once: ``hub`` (``AMUX_HUB``
text, or the socket path for a local Hub).  Where the generic next step
(start a Hub) does not fit, the error carries its own (a TLS or network
problem, a Hub that is slow), worded for an agent and a person alike
(DESIGN.md §8).  The client (:mod:`tools.client.blocking`) raises exactly
these, so the CLI and ``amux mcp`` (the relay) say the same thing about the
same failure.
"""

from __future__ import annotations

from amux_memory.protocol.endpoint import Endpoint
from amux_memory.protocol.errors import ErrorCode, HubError

RETRY_SAFE = frozenset({"search", "get", "export", "list", "history", "log"})
"""Methods that change nothing: resending one whose answer was lost is harmless."""


def where(endpoint: Endpoint) -> dict[str, str]:
    """Error data naming the Hub: ``{"hub": ...}`` (a Unix endpoint's text is its socket path)."""
    return {"hub": str(endpoint)}


MEANWHILE = "; carry on without memory meanwhile."
"""The end of every next step here: an agent keeps working without memory (DESIGN.md §8)."""


def not_listening(endpoint: Endpoint, why: str, via_login: bool = False) -> HubError:
    """Nothing listens at ``endpoint`` (no socket file, connection refused); ``why`` is the OS's reason.
    ``via_login``: the Hub this account joined with ``amux login`` (:func:`joined_hub_step`)."""
    if via_login:
        return HubError(ErrorCode.UNAVAILABLE, f"the Hub you joined with 'amux login' is not answering at {endpoint} "
                        f"({why})", where(endpoint), next_step=joined_hub_step())
    hint = ("start one with 'amux hub start' (or 'amux hub serve' in the foreground) or point AMUX_HOME / AMUX_HUB "
            "at a running Hub"
            if endpoint.kind == "unix" else "check AMUX_HUB and that the Hub runs with hub.listen")
    if endpoint.kind == "unix":
        return HubError(ErrorCode.UNAVAILABLE, f"no Hub is listening at {endpoint} ({why}); {hint}", where(endpoint))
    return HubError(ErrorCode.UNAVAILABLE, f"no Hub is listening at {endpoint} ({why}); {hint}", where(endpoint),
                    next_step="Check AMUX_HUB and that the Hub there runs with hub.listen" + MEANWHILE)


def joined_hub_step() -> str:
    """The next step when the Hub joined with ``amux login`` cannot be reached (DESIGN.md §7.4): its person set
    no variable, so none is named; whoever runs the Hub can say whether it is up or moved."""
    return ("Ask whoever runs that Hub whether it is up; if it moved, 'amux logout' and 'amux login' with a new "
            "invitation ('amux doctor' checks this machine's side)" + MEANWHILE)


def unreachable(endpoint: Endpoint, exc: OSError, via_login: bool = False) -> HubError:
    """Connecting to ``endpoint`` failed for another OS reason (permission, no route, unknown host).
    ``via_login``: the Hub this account joined with ``amux login``."""
    if via_login:
        return HubError(ErrorCode.UNAVAILABLE, f"cannot reach the Hub you joined with 'amux login' at {endpoint}: "
                        f"{exc}", where(endpoint), next_step=joined_hub_step())
    return HubError(ErrorCode.UNAVAILABLE, f"cannot reach the Hub at {endpoint}: {exc}", where(endpoint),
                    next_step="Check AMUX_HUB (or AMUX_HOME) and that the Hub runs there (the message says what "
                    "failed)" + MEANWHILE)


def connect_failed(endpoint: Endpoint, exc: OSError, via_login: bool = False) -> HubError:
    """The error for an ``OSError`` from connecting: :func:`not_listening` for a missing socket or a refusal,
    else :func:`unreachable`."""
    if isinstance(exc, FileNotFoundError | ConnectionRefusedError):
        return not_listening(endpoint, exc.strerror or str(exc), via_login)
    return unreachable(endpoint, exc, via_login)


def tls_failed(endpoint: Endpoint, exc: BaseException, via_login: bool = False) -> HubError:
    """The TLS handshake with ``endpoint`` failed (most often: the certificate is not signed by ``AMUX_HUB_CA``).
    ``via_login``: the Hub this account joined with ``amux login``, whose CA it pinned then."""
    if via_login:
        return HubError(ErrorCode.UNAVAILABLE, f"TLS with the Hub you joined with 'amux login' at {endpoint} failed: "
                        f"{exc} (its certificate is no longer signed by the CA pinned at login)", where(endpoint),
                        next_step="The Hub's certificate changed since you logged in: ask whoever runs it for a new "
                        "invitation, then 'amux logout' and 'amux login' with it" + MEANWHILE)
    return HubError(ErrorCode.UNAVAILABLE, f"TLS with the Hub at {endpoint} failed: {exc} "
                    "(is AMUX_HUB_CA the CA that signed the Hub's certificate?)", where(endpoint),
                    next_step="The Hub's certificate was not accepted: AMUX_HUB_CA must name the CA that signed it "
                    "and AMUX_HUB the name in it" + MEANWHILE)


def no_answer(endpoint: Endpoint, method: str, seconds: float, *, sent: bool = False) -> HubError:
    """The Hub did not answer ``method`` (``"hello"`` while connecting) within ``seconds``.

    For a method other than ``hello``, ``data.uncertain`` is ``sent``: the
    request may have reached the Hub, and a write may have happened.
    """
    data: dict[str, object] = {**where(endpoint), "method": method}
    if method != "hello":
        data["uncertain"] = sent
    return HubError(ErrorCode.UNAVAILABLE, f"the Hub at {endpoint} did not answer {method} within {seconds:g} s",
                    data, next_step="The Hub runs but is slow or stuck: try again shortly" + MEANWHILE)


def lost(endpoint: Endpoint, method: str, reason: str, *, sent: bool) -> HubError:
    """The connection broke during ``method``; ``reason`` reads after "the Hub at X" ("closed the connection").

    When the request may have reached the Hub (``sent``) and could change
    something (not in :data:`RETRY_SAFE`, not ``hello``), the message says
    the outcome is unknown and ``data.uncertain`` is true: a compare-and-swap
    retry would misreport a write that did happen as a conflict, so the caller
    must read the document again (DESIGN.md §4).
    """
    if sent and method not in RETRY_SAFE and method != "hello":
        return HubError(
            ErrorCode.UNAVAILABLE,
            f"the connection to the Hub was lost during {method} ({reason}); whether it took effect is unknown: "
            "read the document again before retrying",
            {**where(endpoint), "method": method, "uncertain": True},
        )
    return HubError(ErrorCode.UNAVAILABLE, f"the Hub at {endpoint} {reason}", {**where(endpoint), "method": method},
                    next_step="The Hub went away during the call: try again once it is back" + MEANWHILE)
