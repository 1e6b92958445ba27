// What an upload becomes on the API: one file is one job (POST /v1/jobs); several files are one
// batch (POST /v1/batches, each file added through POST /v1/batches/{id}/files, then closed),
// each file its own job in it. The upload view only knows submissions (one per file, each with
// its progress), so it does not care which.

const ACCEPTED = /\.(pdf|png|jpe?g|tiff?)$/i;

/** Files the API can take (a PDF or page images); the rest are reported, not sent. */
export function splitAccepted(files) {
  const accepted = [];
  const refused = [];
  for (const file of files) (ACCEPTED.test(file.name) ? accepted : refused).push(file);
  return { accepted, refused };
}

/** [{id, label, files, bytes}]: one submission per file for now. */
export function planSubmissions(files) {
  return files.map((file, index) => ({
    id: `s${index}`,
    label: file.name,
    files: [file],
    bytes: file.size,
  }));
}

/** Sends one submission; resolves to the jobs it created ([{id, pages_total}]; a batch
 * document's page count is known once it is admitted: null until then). */
export async function submit(api, submission, options, onProgress, batchId = null) {
  if (batchId === null) return [await api.submitJob(submission.files, options, onProgress)];
  const added = await api.addBatchFile(batchId, submission.files[0], onProgress);
  return added.job_ids.map((id) => ({ id, pages_total: null }));
}

/** Sends every submission, two at a time (enough to keep a link busy, few enough that the
 * first jobs start while the rest upload). Callbacks get the submission. */
export async function submitAll(api, submissions, options, { onProgress, onDone, onError }) {
  const batch =
    submissions.length > 1
      ? await api.createBatch({ name: `console upload ${new Date().toISOString()}`, ...options })
      : null;
  const queue = [...submissions];
  const worker = async () => {
    for (let next = queue.shift(); next; next = queue.shift()) {
      const submission = next;
      try {
        const jobs = await submit(
          api,
          submission,
          options,
          (sent, total) => onProgress(submission, sent, total),
          batch && batch.id,
        );
        onDone(submission, jobs);
      } catch (error) {
        onError(submission, error);
      }
    }
  };
  await Promise.all([worker(), worker()]);
  if (batch) await api.closeBatch(batch.id); // no more files: it ends when they settle
  return batch;
}
