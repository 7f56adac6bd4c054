// A runnable example: ids of a tag and snowflake ids from leafid servers, with failover.
//
//   node examples/quickstart.js [http://127.0.0.1:8080 [http://127.0.0.1:8081 ...]]
//
// (or LEAFID_SERVERS="http://a:8080,http://b:8080"). Uses the tag `leaf-segment-test`, which
// every fresh leafid database has.

import { Client, RejectedError, UnavailableError } from '../src/index.js';

const servers = process.argv.slice(2).length
  ? process.argv.slice(2)
  : (process.env.LEAFID_SERVERS ?? 'http://127.0.0.1:8080').split(',');

const client = new Client({ servers, batch: 1000, waitTimeoutMs: 3000 });
try {
  const orders = client.segment('leaf-segment-test');
  const ids = [];
  for (let i = 0; i < 5; i++) ids.push(await orders.nextId());
  console.log('segment ids:', ids.map(String).join(', '));

  // Cancellation: give up on a call after 200 ms.
  const snow = await client.nextSnowflakeId({ signal: AbortSignal.timeout(200) });
  console.log('snowflake id:', snow.toString());

  console.log('stats:', client.stats());
  console.log('servers:', client.servers());
} catch (e) {
  if (e instanceof RejectedError) {
    console.error(`refused by ${e.server}: ${e.code}`); // e.g. unknown_biz_tag
  } else if (e instanceof UnavailableError) {
    console.error(`no server answered: ${e.lastFault}`);
  } else {
    console.error(e);
  }
  process.exitCode = 1;
} finally {
  await client.close(); // no timer or socket left: the process ends here
}
