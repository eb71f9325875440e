"""``python -m gpuwise ...``: the same CLI as the ``gpuwise`` script (where the script is not on PATH)."""

from gpuwise.cli.app import main

if __name__ == "__main__":
    main()
