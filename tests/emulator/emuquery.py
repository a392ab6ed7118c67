"""Parsers for the two small languages of Drive requests: the ``q`` filter and the ``fields`` mask.

q (files.list)
--------------
A tokenizer plus a recursive-descent parser for::

    expr    := and_expr ("or" and_expr)*
    and_expr:= not_expr ("and" not_expr)*
    not_expr:= "not" not_expr | "(" expr ")" | term
    term    := STRING "in" "parents"
             | FIELD OP VALUE

Supported terms (anything else raises ``QueryError``, which the server answers with 400 invalid, location q):

* ``name`` with ``=``/``!=`` (case-insensitive) and ``contains`` (case-insensitive prefix of the name)
* ``mimeType`` with ``=``/``!=``/``contains`` (substring)
* ``trashed``, ``starred``, ``sharedWithMe`` with ``=``/``!=`` and ``true``/``false``
* ``'ID' in parents``
* ``modifiedTime``, ``createdTime`` with ``< <= = != > >=`` and an RFC 3339 string (UTC if no zone)
* ``shortcutDetails.targetId`` with ``=``/``!=``

String literals use single quotes; inside them ``\\'`` is a quote and ``\\\\`` a backslash. Keywords
(``and or not in contains true false``) are case-insensitive.

A parsed query is a tree of ``Node`` objects; ``node.match(view)`` evaluates it against an object that
has the attributes ``name``, ``mime_type``, ``trashed``, ``parents`` (ids), ``created_ms``,
``modified_ms``, ``shortcut_target`` (id or None) and optionally ``shared_with_me`` (default False). ``node.parent_hint()`` returns the set of parent ids
that any match must have (or None when the query does not restrict parents), so a server can look at
those folders' children only.

fields (FieldMask)
------------------
``parse_fields("nextPageToken,files(id,name,capabilities/canDownload)")`` returns a mask: a dict from
field name to a sub-mask, where ``None`` selects the whole value and the key ``"*"`` selects every field
of that level. ``validate_fields(mask, schema)`` checks the names against a schema (dict name -> sub
schema, ``None`` for scalars, ``ANY`` for objects whose keys are not checked) and raises ``FieldError``
naming the first unknown field. ``project(value, mask)`` applies a mask to plain JSON data.
"""

import datetime
import re


class QueryError(ValueError):
    pass


class FieldError(ValueError):
    """``args[0]`` is the offending field name or text."""


# ---------------------------------------------------------------------------------------------------
# q tokenizer

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>'(?:[^'\\]|\\.)*')
  | (?P<op><=|>=|!=|=|<|>)
  | (?P<lparen>\()
  | (?P<rparen>\))
  | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
""", re.VERBOSE | re.DOTALL)

_KEYWORDS = {"and", "or", "not", "in", "contains", "true", "false", "has"}


def _unescape(literal):
    body = literal[1:-1]
    return re.sub(r"\\(.)", r"\1", body, flags=re.DOTALL)


def tokenize(text):
    """List of (kind, value) pairs; kind is string, op, lparen, rparen, keyword or field."""
    tokens = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise QueryError(f"unexpected character {text[pos]!r} at {pos}")
        pos = m.end()
        kind = m.lastgroup
        value = m.group()
        if kind == "space":
            continue
        if kind == "string":
            value = _unescape(value)
        elif kind == "word":
            if value.lower() in _KEYWORDS:
                kind, value = "keyword", value.lower()
            else:
                kind = "field"
        tokens.append((kind, value))
    return tokens


# ---------------------------------------------------------------------------------------------------
# q syntax tree

class Node:
    def match(self, view):
        raise NotImplementedError

    def parent_hint(self):
        return None


class And(Node):
    def __init__(self, left, right):
        self.left, self.right = left, right

    def match(self, view):
        return self.left.match(view) and self.right.match(view)

    def parent_hint(self):
        hints = [h for h in (self.left.parent_hint(), self.right.parent_hint()) if h is not None]
        if not hints:
            return None
        return set.intersection(*hints)


class Or(Node):
    def __init__(self, left, right):
        self.left, self.right = left, right

    def match(self, view):
        return self.left.match(view) or self.right.match(view)

    def parent_hint(self):
        left, right = self.left.parent_hint(), self.right.parent_hint()
        if left is None or right is None:
            return None
        return left | right


class Not(Node):
    def __init__(self, inner):
        self.inner = inner

    def match(self, view):
        return not self.inner.match(view)


class InParents(Node):
    def __init__(self, parent_id):
        self.parent_id = parent_id

    def match(self, view):
        return self.parent_id in view.parents

    def parent_hint(self):
        return {self.parent_id}


class Compare(Node):
    """``field op value``; ``get`` extracts the field from a view, ``test`` compares."""

    def __init__(self, get, test):
        self.get, self.test = get, test

    def match(self, view):
        return self.test(self.get(view))


def parse_time_ms(text):
    """RFC 3339 text -> milliseconds since the epoch (UTC when no zone is given)."""
    try:
        value = datetime.datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError as exc:
        raise QueryError(f"bad time {text!r}") from exc
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return round(value.timestamp() * 1000)


_ORDERING = {
    "=": lambda a, b: a == b, "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


def _string_term(field, op, value):
    if field == "name":
        if op == "contains":
            prefix = value.casefold()
            return Compare(lambda v: v.name, lambda name: name.casefold().startswith(prefix))
        wanted = value.casefold()
        return Compare(lambda v: v.name, lambda name: (name.casefold() == wanted) == (op == "="))
    if field == "mimeType":
        if op == "contains":
            return Compare(lambda v: v.mime_type, lambda mime: value.lower() in mime.lower())
        return Compare(lambda v: v.mime_type, lambda mime: (mime == value) == (op == "="))
    # shortcutDetails.targetId
    return Compare(lambda v: v.shortcut_target, lambda target: (target == value) == (op == "="))


_STRING_OPS = {
    "name": {"=", "!=", "contains"},
    "mimeType": {"=", "!=", "contains"},
    "shortcutDetails.targetId": {"=", "!="},
}
_BOOL_FIELDS = {
    "trashed": lambda v: v.trashed,
    "starred": lambda v: False,
    "sharedWithMe": lambda v: getattr(v, "shared_with_me", False),
}
_TIME_FIELDS = {
    "modifiedTime": lambda v: v.modified_ms,
    "createdTime": lambda v: v.created_ms,
}


class _Parser:
    def __init__(self, tokens):
        self.tokens = tokens
        self.pos = 0

    def peek(self):
        return self.tokens[self.pos] if self.pos < len(self.tokens) else (None, None)

    def take(self, kind=None, value=None):
        tok = self.peek()
        if tok[0] is None or (kind and tok[0] != kind) or (value and tok[1] != value):
            want = value or kind or "a token"
            raise QueryError(f"expected {want} at token {self.pos}, got {tok[1]!r}")
        self.pos += 1
        return tok

    def parse(self):
        node = self.expr()
        if self.pos != len(self.tokens):
            raise QueryError(f"unexpected {self.peek()[1]!r} at token {self.pos}")
        return node

    def expr(self):
        node = self.and_expr()
        while self.peek() == ("keyword", "or"):
            self.pos += 1
            node = Or(node, self.and_expr())
        return node

    def and_expr(self):
        node = self.not_expr()
        while self.peek() == ("keyword", "and"):
            self.pos += 1
            node = And(node, self.not_expr())
        return node

    def not_expr(self):
        kind, value = self.peek()
        if (kind, value) == ("keyword", "not"):
            self.pos += 1
            return Not(self.not_expr())
        if kind == "lparen":
            self.pos += 1
            node = self.expr()
            self.take("rparen")
            return node
        return self.term()

    def term(self):
        kind, value = self.take()
        if kind == "string":
            self.take("keyword", "in")
            _, collection = self.take("field")
            if collection != "parents":
                raise QueryError(f"unsupported collection {collection!r}")
            return InParents(value)
        if kind != "field":
            raise QueryError(f"expected a field name, got {value!r}")
        field = value
        op_kind, op = self.take()
        if op_kind not in ("op", "keyword"):
            raise QueryError(f"expected an operator after {field}")
        if field in _STRING_OPS:
            if op not in _STRING_OPS[field]:
                raise QueryError(f"operator {op} not supported for {field}")
            return _string_term(field, op, self.take("string")[1])
        if field in _BOOL_FIELDS:
            if op not in ("=", "!="):
                raise QueryError(f"operator {op} not supported for {field}")
            _, literal = self.take("keyword")
            if literal not in ("true", "false"):
                raise QueryError(f"{field} needs true or false")
            wanted = (literal == "true") == (op == "=")
            get = _BOOL_FIELDS[field]
            return Compare(get, lambda flag: bool(flag) == wanted)
        if field in _TIME_FIELDS:
            if op not in _ORDERING:
                raise QueryError(f"operator {op} not supported for {field}")
            limit = parse_time_ms(self.take("string")[1])
            compare = _ORDERING[op]
            return Compare(_TIME_FIELDS[field], lambda ms: compare(ms, limit))
        raise QueryError(f"unsupported query term {field!r}")


def parse_query(text):
    """Parse a files.list ``q`` into a Node (raises QueryError)."""
    tokens = tokenize(text)
    if not tokens:
        raise QueryError("empty query")
    return _Parser(tokens).parse()


def quote(value):
    """A q string literal for ``value`` (the escaping a client does)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


# ---------------------------------------------------------------------------------------------------
# fields (FieldMask)

ANY = "any"   # schema marker: an object whose sub-fields are not checked
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\*")


def _merge(mask, name, sub):
    if name in mask and (mask[name] is None or sub is None):
        mask[name] = None          # selecting the whole value wins over a sub-selection
    elif name in mask:
        for key, value in sub.items():
            _merge(mask[name], key, value)
    else:
        mask[name] = sub


def parse_fields(text):
    """Parse a FieldMask into a mask dict (raises FieldError on bad syntax)."""
    pos = 0

    def parse_list(closing):
        nonlocal pos
        mask = {}
        while True:
            path = []
            while True:
                while pos < len(text) and text[pos] == " ":
                    pos += 1
                m = _FIELD_NAME.match(text, pos)
                if not m:
                    raise FieldError(text[pos:] or text)
                path.append(m.group())
                pos = m.end()
                if pos < len(text) and text[pos] == "/":
                    pos += 1
                    continue
                break
            sub = None
            if pos < len(text) and text[pos] == "(":
                pos += 1
                sub = parse_list(")")
            for name in reversed(path[1:]):
                sub = {name: sub}
            _merge(mask, path[0], sub)
            while pos < len(text) and text[pos] == " ":
                pos += 1
            if pos < len(text) and text[pos] == ",":
                pos += 1
                continue
            if closing:
                if pos >= len(text) or text[pos] != closing:
                    raise FieldError(text)
                pos += 1
            elif pos != len(text):
                raise FieldError(text[pos:])
            return mask

    return parse_list(None)


def validate_fields(mask, schema):
    """Raise FieldError(name) for the first name in ``mask`` that ``schema`` does not know."""
    if mask is None or schema is ANY:
        return
    if schema is None:                       # a scalar cannot have sub-fields
        raise FieldError(next(iter(mask)))
    for name, sub in mask.items():
        if name == "*":
            if sub is not None:
                raise FieldError("*")
            continue
        if name not in schema:
            raise FieldError(name)
        validate_fields(sub, schema[name])


def selected(mask, name):
    """(is ``name`` selected by ``mask``, its sub-mask)."""
    if mask is None:
        return True, None
    if name in mask:
        return True, mask[name]
    return "*" in mask, None


def project(value, mask):
    """Apply ``mask`` to plain JSON ``value`` (dicts are filtered, lists element-wise)."""
    if mask is None:
        return value
    if isinstance(value, list):
        return [project(v, mask) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        wanted, sub = selected(mask, key)
        if wanted:
            out[key] = project(item, sub)
    return out
