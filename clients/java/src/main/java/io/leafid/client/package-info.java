/**
 * The leafid client for Java: ids from leafid servers, served from local double-buffered
 * batches with failover across servers.
 *
 * <p>Start with {@link io.leafid.client.LeafidClient#builder()}; every error the client raises is
 * a {@link io.leafid.client.LeafidException}.
 */
package io.leafid.client;
