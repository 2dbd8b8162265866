/** An expected failure of the data pipeline (bad input, missing dataset): shown as its message, without a stack. */
export class DataError extends Error {
  override readonly name: string = 'DataError';
}

export class TokenizerFileError extends DataError {
  override readonly name = 'TokenizerFileError';
}

export class DownloadError extends DataError {
  override readonly name = 'DownloadError';
}
