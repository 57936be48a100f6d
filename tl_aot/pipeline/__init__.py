"""One build, plan to publish: the stages, their scheduler, the variant cache, clusters and shards."""
