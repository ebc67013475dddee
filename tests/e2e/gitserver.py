"""A git smart-HTTP server for the tests: `git http-backend` (git's own CGI
program) behind HTTP Basic authentication, as a git host serves a private
repository. Run in the rig's world namespace:

    python3 gitserver.py PORT ROOT TOKEN_FILE LOG

Every repository under ROOT is served. A request whose Authorization is
Basic of any user and the token in TOKEN_FILE (read per request) is passed
to git http-backend; any other gets 401 with a Basic challenge, as git
expects before it asks its credential helper. Each request is one JSON line
in LOG: the Host it named, the path, and whether it was let in and with
which user (never the password)."""

import base64
import http.server
import json
import os
import subprocess
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    root = token_file = log = None

    def log_message(self, fmt, *args):
        pass

    def _record(self, **kw):
        with open(self.log, "a") as f:
            f.write(json.dumps(dict(host=self.headers.get("Host", ""),
                                    path=self.path.partition("?")[0], **kw)) + "\n")

    def _user(self):
        """The user of a valid Authorization, or None."""
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Basic "):
            return None
        try:
            user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        with open(self.token_file) as f:
            token = f.read().strip()
        return user if user and password == token else None

    def _serve(self):
        user = self._user()
        self._record(auth=user is not None, user=user or "",
                     tried="Authorization" in self.headers)
        body = b""
        if self.command == "POST":
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if user is None:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        env = dict(PATH=os.environ.get("PATH", "/usr/bin:/bin"), GIT_PROJECT_ROOT=self.root,
                   GIT_HTTP_EXPORT_ALL="1", PATH_INFO=path, QUERY_STRING=query,
                   REQUEST_METHOD=self.command, REMOTE_USER=user,
                   CONTENT_TYPE=self.headers.get("Content-Type", ""),
                   CONTENT_LENGTH=str(len(body)))
        out = subprocess.run(["git", "http-backend"], input=body, env=env,
                             capture_output=True, timeout=60).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        if not payload and b"\n\n" in out:
            head, _, payload = out.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.split()[0])
            elif key:
                headers.append((key, value.strip()))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = _serve
    do_POST = _serve


def main():
    port, root, token_file, log = sys.argv[1:5]
    Handler.root, Handler.token_file, Handler.log = root, token_file, log
    http.server.ThreadingHTTPServer(("0.0.0.0", int(port)), Handler).serve_forever()


if __name__ == "__main__":
    main()
