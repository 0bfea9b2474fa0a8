"""The build pipeline: from a library's llms.txt to a published bundle (``build.build_target``).

Nothing here imports ``docbundle.indexer.release``: release tools read what the pipeline writes.
"""
