"""docbundle indexer: crawl llms.txt documentation into content-hashed search bundles.

The rooms (imports run down this list: ``release`` may import ``pipeline``, never the reverse, and
nothing here imports ``docbundle.server``)::

    cli/          docbundle-index: the command table, one module per command group (build, check, release, nightly)
    config.py     libraries.toml: the config, its validation, and the build targets it names
    errors.py     the one exception tree
    pipeline/     from a library's llms.txt to a published bundle
        build.py      build_target, BuildRun: one library version, crawl to publish, under its lock
        source.py     the library's llms.txt fetched and parsed, or its folder listed
        collect.py    the pages a build gathers: listed, inline, followed; their document ids
        addresses.py  page keys, document ids, the URLs a manifest shows
        assemble.py   prepared pages into documents, chunks, hashes and the manifest
        llmstxt/      the lenient llms.txt / llms-full.txt parser and renderer (one module per step)
        page.py       front matter: the one parser of a page's key: value block
        chunk.py      markdown/MDX pages into heading-path chunks
        html/         HTML pages into markdown (convert, normalise, content, generator, refresh, tree, decode)
        nesting.py    the element-nesting bound applied before an HTML page is parsed
        follow.py     optional link following: page links, the follow prefix, robots.txt
        crawl.py      the crawl's entry points: crawl(), fetch_one()
        session.py    CrawlSession: one HTTP client and its per-host state for a whole build
        fetched.py    fetch results and options; body, type and local-file rules
        scope.py      what a crawl may touch (addresses, hosts, local folders)
        cache.py      the on-disk crawl cache (ETag / Last-Modified)
        prepare/      chunking and analysis in worker processes: one page, the worker, the pool, ahead
        write.py      the whoosh index writer, the manifest's file list, pruning old builds
        safety.py     the content-safety scan recorded in the manifest
        progress.py   progress bars and lines
    release/      tools that run on built bundles
        metrics.py    nDCG@k, MRR@k, Recall@k (benchmarks import them too)
        regress.py    golden queries against a bundle
        diff.py       what differs between two bundles
        audit.py      freshness, completeness, coverage, safety findings
        export.py     a bundle as JSON, SQLite or markdown
        nightly.py    the nightly job: build, check, package what changed
"""

from docbundle.common.process import skip_httpx_cli

# httpx's command-line client (click, rich, pygments: 45 ms of every indexer process's start) is never
# run by the indexer: kept from loading, before anything here imports httpx (``skip_httpx_cli`` says how).
skip_httpx_cli()
