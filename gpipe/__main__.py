from .cli import main

if __name__ == "__main__":  # not on import (pytest's --doctest-modules imports every module)
    raise SystemExit(main())
