"""What can go wrong in a store, as one small tree of exceptions.

    StoreError                  anything the store refuses or cannot do
     ├── StoreUnavailable       the store cannot be opened, connected to, or read
     │    └── StoreNotFound     there is no store there, and none was to be made
     ├── SchemaTooNew           the store was written by a newer freezeframe
     ├── CassetteNotFound       no cassette of that name
     ├── ExchangeNotFound       no exchange at that position of a cassette
     └── StoreClosed            the store was used after close()

Callers catch ``StoreError`` to print one line (the CLI) or answer one HTTP error
(the proxy); the subclasses exist for the few places that answer differently, such
as a 404 for a missing cassette. Every message is a single line that says what
failed and where, and never contains a password: URLs are masked before they are
put in a message.
"""


class StoreError(Exception):
    """Base class of every error the storage package raises."""

    def __reduce__(self) -> tuple[object, ...]:
        # Pickled as it is, whatever its constructor takes: a job's error crosses from the
        # writer process (storage.sql.writerprocess).
        return (_rebuilt, (type(self), self.args, self.__dict__))


def _rebuilt(
    cls: type[StoreError], args: tuple[object, ...], state: dict[str, object]
) -> StoreError:
    """A StoreError unpickled: its message and attributes, without calling its __init__."""
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class StoreUnavailable(StoreError):
    """The store cannot be opened, connected to, or read right now."""


class StoreNotFound(StoreUnavailable):
    """Nothing at the URL holds a store, and the caller asked not to create one.

    Read-only commands open stores this way, so that a typo in ``--data-dir`` says so
    instead of quietly making an empty store and listing nothing.
    """


class SchemaTooNew(StoreError):
    """The store's schema version is newer than this code understands.

    Writing to it could corrupt data that a newer freezeframe relies on, so the
    store is refused rather than used.
    """

    def __init__(self, found: int, supported: int, where: str) -> None:
        super().__init__(
            f"store schema version {found} at {where} is newer than this freezeframe "
            f"supports ({supported}); upgrade freezeframe"
        )
        self.found = found
        self.supported = supported


class CassetteNotFound(StoreError):
    """No cassette of that name has any recording in the store."""

    def __init__(self, cassette: str, where: str) -> None:
        super().__init__(f"no cassette named {cassette!r} in store {where}")
        self.cassette = cassette


class ExchangeNotFound(StoreError):
    """The cassette exists but holds no exchange at that position."""

    def __init__(self, cassette: str, seq: int) -> None:
        super().__init__(f"cassette {cassette!r} has no exchange {seq}")
        self.cassette = cassette
        self.seq = seq


class StoreClosed(StoreError):
    """The store was used after close(); nothing more can be written or read."""

    def __init__(self, where: str) -> None:
        super().__init__(f"store {where} is closed")
