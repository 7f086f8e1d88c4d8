"""Sans-IO: when an HTTP/1.1 connection has waited too long for its client.

Three limits, as nginx has them (``client_header_timeout``, ``client_body_timeout``,
``keepalive_timeout``):

* a request's head must arrive within ``head_s`` of its first byte (a new connection
  within ``head_s`` of being accepted): a client dribbling headers (slowloris) is cut;
* its body may pause at most ``body_s`` between two reads, and must arrive at
  ``min_body_rate`` bytes a second at least, on average, once ``body_grace_s`` have
  passed since it began (as Kestrel's minimum request body data rate): a body sent a
  byte a second, each read well within ``body_s``, is cut all the same;
* between requests, a connection may stay idle ``keepalive_s``.

The protocol reports what the parser saw and when reads end; :meth:`expired` says
whether the current phase has run out. While a request is being answered (or relayed
to aiohttp, which keeps its own keep-alive timer) there is no deadline. Time is whatever
monotonic clock the caller passes in.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass


class Phase(enum.Enum):
    IDLE = "idle"  # between requests (or not one byte yet)
    HEAD = "head"  # a request's head is arriving
    BODY = "body"  # its body is arriving
    BUSY = "busy"  # it is complete: being answered, or relayed


@dataclass(frozen=True, slots=True)
class Timeouts:
    head_s: float = 15.0
    body_s: float = 30.0
    keepalive_s: float = 75.0
    send_s: float = 60.0  # how long writes may stay paused on a client that reads nothing
    min_body_rate: float = 1024.0  # bytes a second a body must average (0: no minimum)
    body_grace_s: float = 5.0  # from the body's start, before the rate is asked


class ConnectionClock:
    __slots__ = ("body_bytes", "body_since", "deadline", "heard", "phase", "timeouts")

    def __init__(self, timeouts: Timeouts, now: float) -> None:
        self.timeouts = timeouts
        self.phase = Phase.IDLE
        self.heard = False  # bytes of the current request arrived (a 408 can be sent)
        self.deadline = now + timeouts.head_s  # a new connection must speak soon
        self.body_bytes = 0  # of the body arriving, so far (the parser adds them)
        self.body_since = math.inf  # when its first read ended without all of it

    # The parser's callbacks (no clock read: the common request arrives in one read).

    def begin(self) -> None:
        self.phase = Phase.HEAD
        self.heard = True
        self.deadline = math.inf  # set by the read that ends without the whole head

    def head_done(self) -> None:
        self.phase = Phase.BODY
        self.body_bytes = 0
        self.body_since = math.inf

    def message_done(self) -> None:
        self.phase = Phase.BUSY
        self.deadline = math.inf

    # The protocol's events.

    def read_ended(self, now: float) -> None:
        """A read ended with a request still arriving: start (or extend) its deadline."""
        if self.phase is Phase.HEAD:
            if self.deadline == math.inf:
                self.deadline = now + self.timeouts.head_s
        elif self.phase is Phase.BODY:
            t = self.timeouts
            if self.body_since == math.inf:
                self.body_since = now
            deadline = now + t.body_s
            if t.min_body_rate > 0:  # when what arrived stops being enough
                due = self.body_since + t.body_grace_s + self.body_bytes / t.min_body_rate
                deadline = min(deadline, max(due, now + 0.001))
            self.deadline = deadline

    def served(self, now: float) -> None:
        """Every request so far is answered: the keep-alive wait starts."""
        self.phase = Phase.IDLE
        self.heard = False
        self.deadline = now + self.timeouts.keepalive_s

    @property
    def waiting(self) -> bool:
        """A request is arriving (its head or body): a deadline may need arming now."""
        return self.phase is Phase.HEAD or self.phase is Phase.BODY

    def expired(self, now: float) -> bool:
        return now >= self.deadline
