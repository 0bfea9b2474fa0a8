"""Release tools: what runs on built bundles (regression checks, diff, audit, export, the nightly job).

They may import the build pipeline (``docbundle.indexer.pipeline``); the pipeline never imports them.
"""
