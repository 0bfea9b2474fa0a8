"""``python -m docbundle.indexer.cli``: the ``docbundle-index`` console script."""

from docbundle.indexer.cli import console

if __name__ == "__main__":
    console()
