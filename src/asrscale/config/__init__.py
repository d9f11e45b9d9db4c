"""The configuration of a study, read without torch: the schema that checks config.yaml and holds
its defaults (`schema`), the settings of each stage (`sections`), the one table of algorithms
(`algorithms`), every path the workflow writes (`paths`), and the resolver that turns a
configuration into a study's runs and every stage's settings (`study`)."""
