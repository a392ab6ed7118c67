"""Reading the request body of upload requests for the Drive emulator's HTTP handler.

Upload requests (kinds in emuapi.STREAMED_KINDS) have their body read only after the fault rules
decided (emufaults.py): a ``status`` fault answers before the body is read (``_drain_body`` drops it
afterwards so the connection stays usable), ``reset_in_body`` cuts the body after B bytes (or, past
its end, loses the answer), ``stall_in_body`` pauses part-way. Bodies with ``Content-Length`` and
with ``Transfer-Encoding: chunked`` are read; a body cut short leaves ``req.body_complete`` false.
``UploadBodyMixin`` is mixed into drive_emulator.Handler (it uses the handler's ``rfile``,
``headers`` and ``_pause``).
"""

MAX_UPLOAD_BODY = 8 << 30                # the largest upload request body read (bytes)


class Abort(Exception):
    """Stop answering and close the connection: the client went away (``cancelled``), or a reset or
    drop fault (``reset``: with a TCP reset)."""

    def __init__(self, reset=False, cancelled=False):
        super().__init__()
        self.reset = reset
        self.cancelled = cancelled


class UploadBodyMixin:
    def _read_upload_body(self, req, fault):
        """Read the body of an upload request (a kind in emuapi.STREAMED_KINDS) into ``req.body``,
        applying the fault's ``reset_in_body`` and ``stall_in_body``; a body cut short (the client
        went away, or the reset) sets ``req.body_complete`` false (and ``req.body_reset``)."""
        self._body_read = True
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            req.body, req.body_complete = self._read_chunked()
            return
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            n = -1
        if n < 0 or n > MAX_UPLOAD_BODY:
            raise Abort()
        events = []
        if fault and fault.reset_in_body is not None:
            if fault.reset_in_body >= n:
                req.reset_after_answer = True
            else:
                events.append((fault.reset_in_body, "reset"))
        if fault and fault.stall_in_body is not None:
            events.append((fault.stall_in_body, "stall"))
        events.sort()
        data = bytearray()
        try:
            while len(data) < n:
                if events and events[0][0] <= len(data):
                    if events.pop(0)[1] == "reset":
                        req.body_reset = True
                        break
                    self._pause(fault.stall_ms / 1000)
                    continue
                want = min(1 << 20, n - len(data), (events[0][0] - len(data)) if events else n)
                piece = self.rfile.read(want)
                if not piece:
                    break
                data += piece
        except (OSError, Abort):
            pass                                 # the client went away: what came is kept
        req.body, req.body_complete = bytes(data), len(data) == n

    def _read_chunked(self):
        """(body, complete) of a ``Transfer-Encoding: chunked`` request body."""
        data = bytearray()
        try:
            while True:
                size = int(self.rfile.readline(1024).split(b";")[0].strip() or b"x", 16)
                if size == 0:
                    while self.rfile.readline(1024).strip():
                        pass                     # trailers
                    return bytes(data), True
                piece = self.rfile.read(size)
                data += piece
                if len(piece) < size or self.rfile.read(2) != b"\r\n" or len(data) > MAX_UPLOAD_BODY:
                    break
        except (OSError, ValueError):
            pass
        self.close_connection = True
        return bytes(data), False

    def _drain_body(self):
        """Read and drop an upload body that was answered without being read (a status fault), so
        that the connection can take the next request; close it when that is not possible."""
        if self._body_read:
            return
        try:
            n = int(self.headers.get("Content-Length") or 0)
            while n > 0:
                piece = self.rfile.read(min(n, 1 << 20))
                if not piece:
                    break
                n -= len(piece)
            if n > 0 or "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                self.close_connection = True
        except (OSError, ValueError):
            self.close_connection = True
