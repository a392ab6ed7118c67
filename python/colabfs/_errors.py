"""colabfs.Error, and keeping secrets out of what it says."""

import os
import re

# what a token or key looks like in a command's output, whatever printed it
_SECRETS = [
    (re.compile(r"ya29\.[\w.\-]+"), "ya29.<hidden>"),
    (re.compile(r"(?i)(bearer\s+)[\w.\-~+/=]+"), r"\1<hidden>"),
    (re.compile(r'(?i)("(?:access_token|refresh_token|id_token|private_key|client_secret)"\s*:\s*")'
                r'[^"]*'), r"\1<hidden>"),
    (re.compile(r"(?i)\b((?:access_token|refresh_token|client_secret)=)[^&\s]+"), r"\1<hidden>"),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)",
                re.S), "<private key hidden>"),
]


def scrub(text):
    """text with anything that looks like a token or a key replaced, and the
    value of $COLABFS_ACCESS_TOKEN wherever it appears."""
    if not text:
        return text
    tok = os.environ.get("COLABFS_ACCESS_TOKEN")
    if tok and len(tok) >= 8:
        text = text.replace(tok, "<hidden>")
    for rx, repl in _SECRETS:
        text = rx.sub(repl, text)
    return text


class Error(Exception):
    """A colabfs operation that failed.

    str(e) is what went wrong (and the fix on a second line); ``e.fix`` is a
    one-line what-to-do (or None), ``e.path`` the file it concerns (or None),
    ``e.failed`` [(path, why)] for each file that could not be uploaded,
    ``e.checks`` the failing checks of ``colabfs doctor`` when it was run."""

    def __init__(self, message, fix=None, path=None, failed=None, checks=None):
        self.message = scrub(str(message)).strip()
        self.fix = scrub(fix).strip() if fix else None
        self.path = path
        self.failed = list(failed or [])
        self.checks = list(checks or [])
        super().__init__(self.message)

    def __str__(self):
        return self.message + ("\nfix: " + self.fix if self.fix else "")

    def __reduce__(self):  # intact through pickle (a DataLoader worker's error)
        return (self.__class__, (self.message, self.fix, self.path, self.failed, self.checks))


class MountpointError(Error, ValueError):
    """A mountpoint refused before anything starts (as google.colab.drive
    refuses it, with ValueError)."""
