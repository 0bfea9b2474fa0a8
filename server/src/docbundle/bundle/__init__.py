"""The docbundle bundle format (version 1): manifest, document store, analyzer and schema, verification."""
