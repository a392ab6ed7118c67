"""Security and fallback knobs of the Drive emulator (see drive_emulator.py's --help).

``Knobs.intercept(req, route)`` runs before the API answers a request and returns the Response that
replaces the API's, or None:

* ``token_redirect`` (``--token-redirect URL``): the OAuth token endpoint answers every POST with
  ``307 Temporary Redirect`` to URL, as a hostile or misconfigured endpoint would: a client that
  follows it posts the refresh token, client secret or JWT to URL.
* ``revision_404`` (``--revision-404 ID``, repeatable): a download of a revision of file ID
  (``/files/ID/revisions/REV?alt=media``) answers 404 notFound although files.get still reports
  REV as the head revision (Drive does this for some shared files); the file's current content
  (``/files/ID?alt=media``) downloads as usual.
* ``revision_403`` (``--revision-403 ID``, repeatable): the same with 403 insufficientFilePermissions
  (revisions are for editors on some shared files).
"""

from emuapi import ApiError, Response


class Knobs:
    def __init__(self, token_redirect=None, revision_404=(), revision_403=()):
        self.token_redirect = token_redirect
        self.revision_404 = set(revision_404)
        self.revision_403 = set(revision_403)

    def intercept(self, req, route):
        if self.token_redirect and route.kind == "token":
            return Response(307, b"", "text/html", headers=[("Location", self.token_redirect)])
        if route.kind != "media" or "/revisions/" not in req.path:
            return None
        if req.file_id in self.revision_404:
            return ApiError(404, "notFound", "Revision not found.", "revisionId").response()
        if req.file_id in self.revision_403:
            return ApiError(403, "insufficientFilePermissions",
                            "The user does not have sufficient permissions for this file.").response()
        return None
