"""The ``pulsar`` PySpark data source (Python Data Source API, PySpark 4)."""

from __future__ import annotations

from pyspark.errors import PySparkNotImplementedError
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, DataSourceWriter
from pyspark.sql.types import StructType

from spark.schema import ValueSchema
from spark.sink import PulsarBatchWriter, PulsarStreamWriter, SinkOptions
from spark.source import PulsarBatchReader, PulsarStreamReader, SourceOptions, value_schema


class PulsarDataSource(DataSource):
    """Read Pulsar topics into Spark and write rows to Pulsar, batch or streaming.

    Register it with ``spark.dataSource.register(PulsarDataSource)``, then use ``format("pulsar")``.
    The instance holds only its options: clients are made where they are used, never pickled.
    """

    @classmethod
    def name(cls) -> str:
        return "pulsar"

    def _value_schema(self, streaming: bool) -> ValueSchema:
        options = SourceOptions.parse(self.options, streaming)
        with options.new_client() as client:
            return value_schema(client, options)

    def schema(self) -> str:
        return self._value_schema(streaming=False).ddl()

    def reader(self, schema: StructType) -> DataSourceReader:
        options = SourceOptions.parse(self.options, streaming=False)
        return PulsarBatchReader(options, self._value_schema(streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 (Spark's names)
        options = SourceOptions.parse(self.options, streaming=True)
        return PulsarStreamReader(options, self._value_schema(streaming=True))

    def simpleStreamReader(self, schema: StructType) -> None:  # noqa: N802
        raise PySparkNotImplementedError(
            errorClass="NOT_IMPLEMENTED", messageParameters={"feature": "simpleStreamReader"}
        )

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise ValueError("the pulsar sink only appends: use mode('append')")
        return PulsarBatchWriter(SinkOptions.parse(self.options, streaming=False))

    def streamWriter(self, schema: StructType, overwrite: bool) -> PulsarStreamWriter:  # noqa: N802
        return PulsarStreamWriter(SinkOptions.parse(self.options, streaming=True))
