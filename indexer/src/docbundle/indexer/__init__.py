"""docbundle indexer: crawl llms.txt documentation into content-hashed search bundles."""
