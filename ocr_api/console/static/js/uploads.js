// What an upload becomes on the API. Today each file is its own job (POST /v1/jobs). When
// batches exist, planSubmissions() returns one "batch" submission holding every file and
// submit() posts it to /v1/batches: the upload view only knows submissions, so it does not
// change.

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

/** Sends one submission; resolves to the jobs it created ([{id, status, pages_total}]). */
export async function submit(api, submission, options, onProgress) {
  const accepted = await api.submitJob(submission.files, options, onProgress);
  return [accepted];
}

/** Sends every submission, two at a time (enough to keep a link busy, few enough that the
 * first jobs start while the rest upload). Callbacks get the submission. */
export async function submitAll(api, submissions, options, { onProgress, onDone, onError }) {
  const queue = [...submissions];
  const worker = async () => {
    for (let next = queue.shift(); next; next = queue.shift()) {
      const submission = next;
      try {
        const jobs = await submit(api, submission, options, (sent, total) =>
          onProgress(submission, sent, total),
        );
        onDone(submission, jobs);
      } catch (error) {
        onError(submission, error);
      }
    }
  };
  await Promise.all([worker(), worker()]);
}
