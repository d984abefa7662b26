"""Where a table or key of a TOML text starts, so errors found after parsing can name a line.

`tomllib` reports positions only for syntax errors; a rules file that parses but means nothing
(an unknown key, a bad regex) deserves the same precision. This scanner follows the header and
key lines of a text `tomllib` has already accepted, so it need not understand all of TOML:
only table headers, the keys at the start of lines, and multi-line strings to skip.
"""

import re

type Address = tuple[str | int, ...]
"""A table's place in the parsed document: `("rule", 0, "substitute", 1)`."""

_HEADER = re.compile(r"\s*(\[\[?)\s*([^\[\]]*?)\s*\]\]?\s*(?:#.*)?")
_KEY = re.compile(r"""\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)\s*[.=]""")
_HEADER_PART = re.compile(r"""\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)\s*\.?""")
_TRIPLE_QUOTE = re.compile(r'"""|\'\'\'')


class TomlLines:
    """The 1-based line of every table header and of every key's first appearance."""

    def __init__(self, text: str) -> None:
        self._tables: dict[Address, int] = {}
        self._keys: dict[tuple[Address, str], int] = {}
        self._array_lengths: dict[Address, int] = {}
        self._scan(text)

    def of(self, table: Address, key: str | None = None) -> int:
        """The line of `key` in `table`, else of the table's header, else of the first line.

        Falling back keeps every error pointing somewhere sensible even for inline tables,
        whose keys this scanner does not follow.
        """
        if key is not None:
            if (table, key) in self._keys:
                return self._keys[table, key]
            for header in ((*table, key), (*table, key, 0)):
                if header in self._tables:
                    return self._tables[header]
        for length in range(len(table), 0, -1):
            if table[:length] in self._tables:
                return self._tables[table[:length]]
            parent, name = table[: length - 1], table[length - 1]
            if isinstance(name, str) and (parent, name) in self._keys:
                return self._keys[parent, name]
        return 1

    def _scan(self, text: str) -> None:
        table: Address = ()
        closing: str | None = None
        for number, line in enumerate(text.splitlines(), start=1):
            if closing is not None:
                if closing in line:
                    closing = None
                continue
            header = _HEADER.fullmatch(line)
            if header is not None:
                table = self._enter(header.group(2), header.group(1) == "[[")
                self._tables.setdefault(table, number)
                continue
            key = _KEY.match(line)
            if key is not None:
                self._keys.setdefault((table, _unquote(key.group(1))), number)
            closing = _opened_multiline(line)

    def _enter(self, dotted: str, is_array: bool) -> Address:
        """Resolve a header to its address, counting array-of-tables entries as TOML does.

        `[[rule.substitute]]` belongs to the latest `[[rule]]`, so its address carries that
        rule's index, and its own count starts afresh under each rule.
        """
        names = [_unquote(part) for part in _HEADER_PART.findall(dotted)]
        address: Address = ()
        for position, name in enumerate(names):
            address = (*address, name)
            if is_array and position == len(names) - 1:
                index = self._array_lengths.get(address, 0)
                self._array_lengths[address] = index + 1
                address = (*address, index)
            elif address in self._array_lengths:
                address = (*address, self._array_lengths[address] - 1)
        return address


def _unquote(name: str) -> str:
    if name[:1] in {'"', "'"}:
        return name[1:-1]
    return name


def _opened_multiline(line: str) -> str | None:
    """The delimiter of a multi-line string left open at the end of `line`, if any."""
    delimiters = _TRIPLE_QUOTE.findall(line)
    if len(delimiters) % 2 == 1:
        return str(delimiters[-1])
    return None
