//! The hybrid retriever: a question is read four ways and the readings meet in one walk.
//!
//! 1. **Passages.** BM25 (tantivy) and dense (MiniLM) each propose `candidates` passages; their
//!    scores, each scaled to [0, 1] and weighted, are the passage prior.
//! 2. **Names.** The longest word n-grams of the question that are entity ids link it to the
//!    graph, each weighted by the share of the question's IDF its words carry (a name made of
//!    common words says little) over its document frequency (and so does a hub). A capitalised
//!    word outside them links, besides, the entity whose name holds it and whose stored name
//!    vector is nearest the question (a name written short); weighted by how near.
//! 3. **Facts.** The facts near what the question links (the linked entities' triples, and those
//!    of the best prior passages) are matched against the question: the share of the question's
//!    BM25 weight (IDF of its analysed terms) a fact's words carry. The best `facts` facts seed
//!    their two ends. This is what tells "the husband of X" from "the river through X's
//!    birthplace": the same seed, different facts, different neighbours. A question about two
//!    named things ("X or Y?") keeps each thing's best facts, each scored against its own best
//!    (`fact_per_name`).
//! 4. **The walk.** Personalized PageRank (damping `damping`) over entities and passages
//!    together (HippoRAG 2's layout): entity-entity edges weighted by their number of triples,
//!    passage-entity edges for the entities a passage mentions. The restart vector puts the
//!    entity seeds' weights (names and fact ends, over their document frequency) beside the
//!    prior passages' (`passage_weight` times their prior), as HippoRAG 2 does: not each side
//!    normalised to a fixed share, so a question whose names are everywhere in the corpus (a
//!    novel's characters, a manual's "window") is walked mostly from its passages, and one
//!    naming a rare thing from that thing (`reset_absolute`). A passage's score is its walk mass
//!    (scaled to the best passage's) plus `prior_mix` times its prior. The prior passages hold
//!    restart mass, so BM25 and dense are never lost by the fusion even at `prior_mix` 0, the
//!    default: on the tuning half adding the prior back after the walk cost Recall@5 (82.2 at
//!    0 against 70.7 at 0.5), since it pulls the lexical near-misses above second-hop passages.
//!
//! 5. **Rank fusion** (off by default). The walk's ranking fused with BM25's and dense's by
//!    reciprocal rank (`fuse_bm25`, `fuse_dense`, `fuse_k`). On 2Wiki questions 0-199 it lifted
//!    comparison Recall@2 (85.3 to 93.1 at weight 1, k 60) but cost Recall@5 overall (85.6 to
//!    69.5): BM25's near-misses push out second-hop passages. Two more switches measured there
//!    and left off: `fact_skip_names` (match facts only on the words outside the linked names;
//!    71.3 Recall@5, because single-word "names" such as "born" or "film" are linked too) and
//!    `fact_link_bonus`.
//!
//! Nothing here names a dataset's words: common words weigh little because BM25's IDF says so.
//! The weights were set on 2Wiki questions 0-499 (docs/retrieval.md says how); `eval` prints the
//! ablation of each part.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::Arc;

use streamrag_schemas::{ScoredDocument, Triple};

use crate::graph::{DocView, EntityView, GraphState};
use crate::normalize::{is_alias_relation, normalize, shorter_forms, unqualified};

use super::bm25::Bm25Index;
use super::dense::DenseIndex;
use super::checkpoint::GlmSlot;
use super::facts::FactVectors;
use super::rank::{display_name, rank_documents, shown_triple, supporting_triples};
use super::{RetrieveError, Retrieved};

/// The hybrid's weights and sizes. `eval --set KEY=VALUE` overrides any of them by name.
#[derive(Debug, Clone, PartialEq)]
pub struct HybridParams {
    /// Passages each of BM25 and dense proposes.
    pub candidates: usize,
    /// Weight of BM25 in the passage prior (0: off).
    pub bm25: f64,
    /// Weight of dense similarity in the passage prior (0: off).
    pub dense: f64,
    /// Link the question's entity names (false: off).
    pub names: bool,
    /// Restart weight of a linked name, before the division by its document frequency.
    pub name_weight: f64,
    /// The share of `name_weight` a name keeps when the question writes none of its words with
    /// a capital ("composer", "place of birth": a concept the graph holds as a name because a
    /// sentence opened with it) while it writes another linked name with one; a question that
    /// capitalises none keeps its concepts whole.
    pub concept_weight: f64,
    /// Restart weight of an entity linked by its name's embedding (among the names holding a
    /// capitalised word of the question, the one whose stored vector is nearest the question's),
    /// times the part of its cosine above `entity_dense_floor` over what lies above the floor;
    /// its facts are matched too. A name the question writes shorter than the graph
    /// ("Cerviño" for "Alberto Casado Cerviño") still links (0: off).
    pub entity_dense: f64,
    /// Most entities linked that way.
    pub entity_dense_k: usize,
    /// Cosine of an entity's name to the question below which it is not linked.
    pub entity_dense_floor: f64,
    /// Facts whose ends seed the walk (0: fact matching off).
    pub facts: usize,
    /// Restart weight of a matched fact's ends, times its match score.
    pub fact_weight: f64,
    /// 2: also match the facts of the matched facts' far ends, scored by what the two facts
    /// together carry of the question (1: the first facts only).
    pub fact_hops: usize,
    /// A chained fact's score is this share of what the two facts carry together.
    pub chain_weight: f64,
    /// The best prior passages whose facts are matched too (besides the linked entities').
    pub fact_passages: usize,
    /// A matched fact's mass goes to both its ends (false: only to the ends that are not
    /// linked names, which have their own).
    pub fact_both_ends: bool,
    /// A fact's word matches a question's word when they are equal or one begins with the
    /// other and the shorter has at least this many letters ("direct" in "director"; 0: equal
    /// only).
    pub fact_prefix: usize,
    /// A fact that touches a linked name scores 1 + this times its match (0: no preference).
    pub fact_link_bonus: f64,
    /// Match facts only on the question's words outside its linked names (false: on all).
    pub fact_skip_names: bool,
    /// Weight of a fact's cosine to the question (its stored embedding; the part above
    /// `fact_dense_floor`) beside its word match; a fact that close matches without a shared
    /// word (0: words only).
    pub fact_dense: f64,
    /// Cosine below which a fact's embedding says nothing.
    pub fact_dense_floor: f64,
    /// The own page of a matched fact's end that is not a linked name gets this times the
    /// fact's score over the best fact's, added to its final score (0: off).
    pub fact_pages: f64,
    /// A matched fact seeds its ends with its score times (score / best fact's score) to this
    /// power: above 0 the facts that say most of the question seed more than the rest.
    pub fact_sharpness: f64,
    /// When the question names two things or more (linked names in separate runs of
    /// capitalised words: "X or Y?"), each thing's best `fact_per_name` facts (its names'
    /// triples and those of their own pages) are kept besides the best `facts` overall, and
    /// scored against that thing's best fact instead of the best of all: the rarer name's facts
    /// match more of the question by its name's words alone, and must not drown the other's.
    /// On 2Wiki questions 0-499 bridge_comparison Recall@5 went 77.7 -> 86.1 / 89.4 / 92.9 at
    /// 2 / 5 / 12, the same at 100 (a page has about that many facts), other types unchanged
    /// (0: off).
    pub fact_per_name: usize,
    /// Run the walk (false: the passage prior alone ranks).
    pub walk: bool,
    /// Weight of the passages (the prior) in the restart vector: with `reset_absolute`, each
    /// prior passage's restart weight is this times its prior; without, the passages' share of
    /// the restart mass (the rest is on entities).
    pub passage_weight: f64,
    /// The restart vector as HippoRAG 2 builds it: each entity seed keeps its own weight (over
    /// its document frequency) and each prior passage gets `passage_weight` times its prior,
    /// both as they are, normalised only together. Seeds that many passages share (a novel's
    /// hero, "vim") then weigh little beside the passages' own evidence, and a rare seed (an
    /// encyclopedia's page title) still leads. Off: entities get 1 - `passage_weight` of the
    /// mass and passages `passage_weight`, however specific the seeds. Measured on the tuning
    /// halves (`scripts/other-kinds.py`, Recall@2 / @5, off -> on): KJV narrative 48.9 / 77.8 ->
    /// 77.8 / 88.9, Vim's manual 37.8 / 57.8 -> 73.3 / 86.7 (BM25 alone 86.7 / 97.8 and 71.1 /
    /// 84.4), 2Wiki 0-499 83.7 / 97.2 -> 83.8 / 96.8.
    pub reset_absolute: bool,
    /// Weight of the edge between a passage and the entity its title names (its subject), beside
    /// 1 for any other entity it mentions: a bridge entity's mass goes mostly to its own page.
    pub title_weight: f64,
    /// Probability of following an edge.
    pub damping: f64,
    pub iterations: usize,
    /// Hops from the entity seeds the walk's entities reach.
    pub hops: usize,
    /// Most entities in the walk.
    pub max_nodes: usize,
    /// An entity mentioned by more documents than this brings none of them into the walk and
    /// lends its facts to no match: it is a hub.
    pub max_df: usize,
    /// Weight of the prior beside the walk in the final score.
    pub prior_mix: f64,
    /// Added to `prior_mix` times the share of the question's IDF weight that its linked names
    /// do not carry: a question the graph's names do not explain ranks by the prior more.
    pub unnamed_mix: f64,
    /// The share of the question's IDF weight its linked names must carry for the walk to be
    /// trusted fully; below it `unnamed_mix` applies in proportion to what is missing.
    pub named_enough: f64,
    /// A passage whose title is an entity the question names (its own page) gets this, times
    /// the name's share of the question's IDF over the best such name's, added to its final
    /// score (walk mass scaled to 1; 0: off). Only names the question writes with a capital
    /// count: "the place of birth of X" names X, not the page about places of birth.
    pub name_pages: f64,
    /// An entity without a page titled by its name has as its own pages those titled by its name
    /// and a qualifier in parentheses ("James Young (director)"; first those that mention it,
    /// then any: "David Bradley (director)" writes "David Shedd Bradley"), or failing those, the page of a
    /// shorter form of a styled name ("George I of Greece" for "King George I of Greece"), for
    /// named and fact pages and facts per name (false: exact titles only).
    pub page_variants: bool,
    /// Failing all those (with `page_variants`), an entity has as its own the pages whose text
    /// gives their subject its name ("also known as Frederick Barbarossa" on "Frederick I, Holy
    /// Roman Emperor"; false: not).
    pub page_aliases: bool,
    /// An entity its documents write in lower case more often than not (a concept: "film",
    /// "husband") has as its own pages only those titled by its name exactly, none of the
    /// variants above (false: concepts have them too).
    pub concept_pages: bool,
    /// Weight of the walk's edge between a passage and a concept it mentions (see
    /// `concept_pages`), beside 1 for a named entity: a concept many passages share spreads the
    /// walk's mass thin among them, where its facts lead somewhere in particular.
    pub concept_edge: f64,
    /// Failing all those (with `page_variants`), the far end of a matched fact has as its own
    /// the pages titled by an entity that entity resolution linked to it, when the graph agrees:
    /// the two share a neighbour or meet in a fact (false: not; a graph built without
    /// resolution has no links). Not for the question's own names: a part of a longer name
    /// ("Henry I" in "Henry I of Ziebice") would take a namesake's page. Off by default: on
    /// 2Wiki questions 0-499 it won 3 questions and lost 5 (namesakes of one family share
    /// neighbours: "John Stewart" -> "Lord John Stewart").
    pub page_links: bool,
    /// The least confidence of a link `page_links` follows.
    pub link_confidence: f32,
    /// The most neighbours a shared neighbour may have to back a link (a hub or a year backs
    /// anything).
    pub link_hub: usize,
    /// When the question names one thing (one run of capitalised words links), the pages of
    /// the entities its best-scored own page mentions get this added to their final score: the
    /// second page a question about one thing needs ("the mother of X", "the director of film
    /// X") is the page of something X's page names. On 2Wiki questions 0-499, of 51
    /// compositional and inference questions whose second page ranked 3rd to 5th, X's page named
    /// it in 43, and named what ranked 2nd in 11 (0: off).
    pub hop_pages: f64,
    /// How many of those pages rise, the best scored first.
    pub hop_pages_k: usize,
    /// Each of those pages also rises by this times how near the question is (cosine above
    /// `fact_dense_floor`) to the best of the anchor page's facts that name its entity: "the
    /// husband of X" picks the page of the one X's page says X married (0: by score alone).
    pub hop_fact: f64,
    /// The page asked from is, of the best-scored pages, the one whose whole title the question
    /// writes (the longest), before the own pages of its linked names: "Alexander Baring, 4th
    /// Baron Ashburton" is asked from that page even when the name linked is the 1st Baron's.
    pub hop_titled: bool,
    /// When the question names two things or more, each of the ten best-scored pages whose whole
    /// title it writes as a name gets this added ("Which magazine came out first, Entertain
    /// Magazine or Woman's Century?" asks for exactly those two pages; 0: off).
    pub titled_pages: f64,
    /// Proper names the question must link for `name_pages` to apply: one named thing already
    /// tops the walk; two compete for its mass, and each is asked about.
    pub name_pages_min: usize,
    /// Once the walk chose the named, fact and hop pages, each walked passage keeps (1 +
    /// prior_boost × its prior) / (1 + prior_boost × the best prior) of its walk mass: among the
    /// passages the walk reaches, those that also say what is asked stay above the rest (on
    /// chunked text, the chunk whose words the question shares above the next chunks of its
    /// scene, which name the same people), and none climbs over a page given a bonus above.
    /// Tuning halves, Recall@2 / @5, 0 -> 0.3: KJV narrative 77.8 / 95.6 -> 80.0 / 95.6, Vim's
    /// manual 71.1 / 91.1 both, 2Wiki 0-499 83.8 / 96.7 both (0: off).
    pub prior_boost: f64,
    /// Longest entity name, in words, tried when linking names.
    pub max_ngram: usize,
    /// The final list fuses the walk's ranking with BM25's and dense's by reciprocal rank:
    /// a passage gets w / (fuse_k + rank) from each list (the walk's w is 1). This is what keeps
    /// the hybrid from falling below its strongest single signal when the walk wanders.
    pub fuse_k: f64,
    /// Weight of BM25's ranking in the final fusion (0: the walk's ranking alone).
    pub fuse_bm25: f64,
    /// Weight of dense's ranking in the final fusion (0: off).
    pub fuse_dense: f64,
    /// Weight of the GLM's ranking in the final fusion, when the hybrid has a GLM checkpoint
    /// (0: the GLM is not asked).
    pub fuse_glm: f64,
    /// Documents the GLM ranks for the fusion (at least the question's top_k).
    pub glm_depth: usize,
    /// The GLM's subgraph budget inside the hybrid (0: the one its checkpoint was trained with).
    pub glm_triplets: usize,
    /// Weight of the GLM's best entities in the walk's restart (each by its probability over
    /// its document frequency, as the names are), when the hybrid has a GLM checkpoint (0: off).
    pub glm_seed: f64,
    /// How each signal's candidate scores are scaled to [0, 1] before the prior sums them
    /// (see [`PriorScale`]).
    pub prior_scale: PriorScale,
}

/// How the prior scales BM25's and dense's candidate scores before summing them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriorScale {
    /// `best`: BM25 over its best score, dense from its worst candidate to its best (the
    /// hybrid's scaling before 2026-12-07). BM25's candidates keep much of their score (the
    /// runner-up's median 0.75-0.87 of the best, measured on three corpora) while dense's are
    /// spread over [0, 1], so a hair between two cosines outweighs a clear lead in BM25.
    Best,
    /// `range`: each signal from its worst candidate to its best.
    Range,
    /// `mean`: each signal from the mean of its candidates to its best, those below the mean at
    /// 0. A signal whose best stands far above the rest keeps that lead; one whose candidates
    /// score alike (a question the signal cannot tell apart) spreads little.
    Mean,
}

impl std::str::FromStr for PriorScale {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "best" => Ok(PriorScale::Best),
            "range" => Ok(PriorScale::Range),
            "mean" => Ok(PriorScale::Mean),
            _ => Err(format!("prior_scale: best, range or mean, not {s}")),
        }
    }
}

impl Default for HybridParams {
    fn default() -> Self {
        HybridParams {
            candidates: 100,
            bm25: 1.0,
            dense: 1.0,
            names: true,
            name_weight: 1.0,
            concept_weight: 0.2,
            entity_dense: 1.0,
            entity_dense_k: 5,
            entity_dense_floor: 0.3,
            facts: 5,
            fact_weight: 1.0,
            fact_hops: 1,
            chain_weight: 0.3,
            fact_passages: 3,
            fact_prefix: 5,
            fact_both_ends: false,
            fact_skip_names: false,
            fact_dense: 1.0,
            fact_dense_floor: 0.2,
            fact_sharpness: 8.0,
            fact_pages: 0.5,
            fact_link_bonus: 0.0,
            fact_per_name: 12,
            walk: true,
            passage_weight: 0.05,
            reset_absolute: true,
            title_weight: 1.0,
            damping: 0.7,
            iterations: 20,
            hops: 2,
            max_nodes: 5_000,
            max_df: 200,
            prior_mix: 0.0,
            unnamed_mix: 1.0,
            named_enough: 0.2,
            name_pages: 1.0,
            name_pages_min: 2,
            hop_pages: 2.0,
            hop_pages_k: 1,
            hop_fact: 4.0,
            hop_titled: true,
            titled_pages: 1.0,
            page_variants: true,
            concept_pages: true,
            concept_edge: 0.03,
            page_aliases: true,
            page_links: false,
            link_confidence: 0.0,
            link_hub: usize::MAX,
            prior_boost: 0.3,
            max_ngram: 10,
            fuse_k: 60.0,
            fuse_bm25: 0.0,
            fuse_dense: 0.0,
            fuse_glm: 0.0,
            glm_depth: 20,
            glm_seed: 0.0,
            glm_triplets: 0,
            prior_scale: PriorScale::Range,
        }
    }
}

impl HybridParams {
    /// Sets one parameter by its field name.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        fn num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, String> {
            v.parse().map_err(|_| format!("{key}: not a number: {v}"))
        }
        match key {
            "candidates" => self.candidates = num(key, value)?,
            "bm25" => self.bm25 = num(key, value)?,
            "dense" => self.dense = num(key, value)?,
            "names" => self.names = value.parse().map_err(|_| format!("names: true or false, not {value}"))?,
            "name_weight" => self.name_weight = num(key, value)?,
            "concept_weight" => self.concept_weight = num(key, value)?,
            "entity_dense" => self.entity_dense = num(key, value)?,
            "entity_dense_k" => self.entity_dense_k = num(key, value)?,
            "entity_dense_floor" => self.entity_dense_floor = num(key, value)?,
            "facts" => self.facts = num(key, value)?,
            "fact_weight" => self.fact_weight = num(key, value)?,
            "fact_hops" => self.fact_hops = num(key, value)?,
            "chain_weight" => self.chain_weight = num(key, value)?,
            "fact_passages" => self.fact_passages = num(key, value)?,
            "fact_prefix" => self.fact_prefix = num(key, value)?,
            "fact_both_ends" => self.fact_both_ends = value.parse().map_err(|_| format!("fact_both_ends: true or false, not {value}"))?,
            "fact_link_bonus" => self.fact_link_bonus = num(key, value)?,
            "fact_skip_names" => self.fact_skip_names = value.parse().map_err(|_| format!("fact_skip_names: true or false, not {value}"))?,
            "fact_dense" => self.fact_dense = num(key, value)?,
            "fact_dense_floor" => self.fact_dense_floor = num(key, value)?,
            "fact_sharpness" => self.fact_sharpness = num(key, value)?,
            "fact_pages" => self.fact_pages = num(key, value)?,
            "fact_per_name" => self.fact_per_name = num(key, value)?,
            "walk" => self.walk = value.parse().map_err(|_| format!("walk: true or false, not {value}"))?,
            "passage_weight" => self.passage_weight = num(key, value)?,
            "reset_absolute" => self.reset_absolute = value.parse().map_err(|_| format!("reset_absolute: true or false, not {value}"))?,
            "title_weight" => self.title_weight = num(key, value)?,
            "damping" => self.damping = num(key, value)?,
            "iterations" => self.iterations = num(key, value)?,
            "hops" => self.hops = num(key, value)?,
            "max_nodes" => self.max_nodes = num(key, value)?,
            "max_df" => self.max_df = num(key, value)?,
            "prior_mix" => self.prior_mix = num(key, value)?,
            "unnamed_mix" => self.unnamed_mix = num(key, value)?,
            "named_enough" => self.named_enough = num(key, value)?,
            "name_pages" => self.name_pages = num(key, value)?,
            "name_pages_min" => self.name_pages_min = num(key, value)?,
            "hop_pages" => self.hop_pages = num(key, value)?,
            "hop_pages_k" => self.hop_pages_k = num(key, value)?,
            "hop_fact" => self.hop_fact = num(key, value)?,
            "titled_pages" => self.titled_pages = num(key, value)?,
            "hop_titled" => self.hop_titled = value.parse().map_err(|_| format!("hop_titled: true or false, not {value}"))?,
            "page_variants" => self.page_variants = value.parse().map_err(|_| format!("page_variants: true or false, not {value}"))?,
            "concept_edge" => self.concept_edge = num(key, value)?,
            "concept_pages" => self.concept_pages = value.parse().map_err(|_| format!("concept_pages: true or false, not {value}"))?,
            "page_aliases" => self.page_aliases = value.parse().map_err(|_| format!("page_aliases: true or false, not {value}"))?,
            "page_links" => self.page_links = value.parse().map_err(|_| format!("page_links: true or false, not {value}"))?,
            "link_confidence" => self.link_confidence = num(key, value)?,
            "link_hub" => self.link_hub = num(key, value)?,
            "prior_boost" => self.prior_boost = num(key, value)?,
            "max_ngram" => self.max_ngram = num(key, value)?,
            "fuse_k" => self.fuse_k = num(key, value)?,
            "fuse_bm25" => self.fuse_bm25 = num(key, value)?,
            "fuse_dense" => self.fuse_dense = num(key, value)?,
            "fuse_glm" => self.fuse_glm = num(key, value)?,
            "glm_depth" => self.glm_depth = num(key, value)?,
            "glm_seed" => self.glm_seed = num(key, value)?,
            "glm_triplets" => self.glm_triplets = num(key, value)?,
            "prior_scale" => self.prior_scale = value.parse()?,
            _ => return Err(format!("no hybrid parameter {key}")),
        }
        Ok(())
    }

    /// Whether a GLM checkpoint given to the hybrid has anything to do (`glm_seed` or `fuse_glm`).
    pub fn asks_glm(&self) -> bool {
        self.glm_seed > 0.0 || self.fuse_glm > 0.0
    }

    /// What a fact's cosine to the question says beyond `fact_dense_floor` (0 without a vector).
    fn above_floor(&self, cosine: Option<f32>) -> f64 {
        cosine.map_or(0.0, |c| (c as f64 - self.fact_dense_floor).max(0.0))
    }

    /// Each part of the hybrid that is on, switched off in turn, by name (a part already off
    /// is left out: its row would only repeat the whole).
    pub fn ablations(&self) -> Vec<(&'static str, HybridParams)> {
        let with = |f: &dyn Fn(&mut HybridParams)| {
            let mut p = self.clone();
            f(&mut p);
            p
        };
        vec![
            ("without BM25", with(&|p| p.bm25 = 0.0)),
            ("without dense", with(&|p| p.dense = 0.0)),
            ("without names", with(&|p| p.names = false)),
            ("without the concept cut", with(&|p| p.concept_weight = 1.0)),
            ("without the concept edge weight", with(&|p| p.concept_edge = 1.0)),
            ("without entity embeddings", with(&|p| p.entity_dense = 0.0)),
            ("without facts", with(&|p| p.facts = 0)),
            ("without fact embeddings", with(&|p| p.fact_dense = 0.0)),
            ("without named pages", with(&|p| p.name_pages = 0.0)),
            ("without fact pages", with(&|p| p.fact_pages = 0.0)),
            ("without hop pages", with(&|p| p.hop_pages = 0.0)),
            ("without titled pages", with(&|p| {
                p.titled_pages = 0.0;
                p.hop_titled = false;
            })),
            ("without qualified titles", with(&|p| p.page_variants = false)),
            ("without alias pages", with(&|p| p.page_aliases = false)),
            ("without facts per name", with(&|p| p.fact_per_name = 0)),
            ("without passages in the walk", with(&|p| p.passage_weight = 0.0)),
            ("without the absolute restart", with(&|p| p.reset_absolute = false)),
            ("without the common scaling (BM25 from 0)", with(&|p| p.prior_scale = PriorScale::Best)),
            ("without the name guard", with(&|p| p.unnamed_mix = 0.0)),
            ("without the prior boost", with(&|p| p.prior_boost = 0.0)),
            ("without the walk (prior only)", with(&|p| p.walk = false)),
            ("without the final rank fusion", with(&|p| {
                p.fuse_bm25 = 0.0;
                p.fuse_dense = 0.0;
            })),
            ("without the GLM", with(&|p| {
                p.fuse_glm = 0.0;
                p.glm_seed = 0.0;
            })),
        ]
        .into_iter()
        .filter(|(_, p)| p != self)
        .collect()
    }
}

/// The hybrid retriever over the live graph and the two passage indexes. Dense is optional:
/// without a sentence encoder the prior is BM25's alone.
#[derive(Clone)]
pub struct Hybrid {
    pub bm25: Arc<Bm25Index>,
    pub dense: Option<Arc<DenseIndex>>,
    /// The facts' embeddings (kept beside the passages' when there is an encoder).
    pub facts: Option<Arc<FactVectors>>,
    /// A GLM checkpoint whose entities restart the walk (`glm_seed`) and whose document
    /// ranking joins the final fusion (`fuse_glm`); asked only when one of them is above 0.
    pub glm: Option<Arc<GlmSlot>>,
    pub params: HybridParams,
}

/// The passage prior, and the two rankings it came from (best first).
struct Prior {
    scores: HashMap<String, f64>,
    bm25: Vec<String>,
    dense: Vec<String>,
}

/// A question's analysed terms with their IDF.
struct Terms {
    idf: HashMap<String, f64>,
    total: f64,
}

impl Hybrid {
    pub fn retrieve_batch(&self, g: &GraphState, qs: &[(&str, usize)]) -> Result<Vec<Retrieved>, RetrieveError> {
        let p = &self.params;
        let qv = match &self.dense {
            // the question's vector serves the passages, the facts and the entity names
            Some(d) if (p.dense > 0.0 && !d.is_empty()) || (self.facts.is_some() && (p.fact_dense > 0.0 || p.entity_dense > 0.0)) => Some(d.embed_questions(&qs.iter().map(|q| q.0).collect::<Vec<_>>())?),
            _ => None,
        };
        // the GLM's entities, one model for the whole batch (the slot may swap meanwhile)
        let glm = match &self.glm {
            Some(slot) if p.asks_glm() => {
                let m = slot.current();
                let scored = m.glm.entity_scores(g, &qs.iter().map(|q| q.0).collect::<Vec<_>>())?;
                Some((m.id.clone(), scored.into_iter().map(|(_, top)| top).collect::<Vec<_>>()))
            }
            _ => None,
        };
        let searcher = self.bm25.searcher();
        qs.iter()
            .enumerate()
            .map(|(i, (q, k))| {
                let glm_top = glm.as_ref().map(|(_, t)| t[i].as_slice());
                let mut r = self.retrieve_one(g, &searcher, q, qv.as_ref().map(|v| v[i].as_slice()), glm_top, *k)?;
                r.checkpoint = glm.as_ref().map(|(id, _)| id.clone());
                Ok(r)
            })
            .collect()
    }

    /// `glm`: the GLM's best entities for the question, with their probabilities.
    fn retrieve_one(&self, g: &GraphState, searcher: &tantivy::Searcher, q: &str, qv: Option<&[f32]>, glm: Option<&[(String, f64)]>, k: usize) -> Result<Retrieved, RetrieveError> {
        let p = &self.params;
        let Prior { scores: prior, bm25: bm25_ranked, dense: dense_ranked } = self.prior(g, searcher, q, qv)?;
        let names = if p.names { link_names(g, q, p.max_ngram) } else { vec![] };
        // the words the question writes with a capital: proper names, not concepts
        let capitalised = capitalised_words(q);
        let near = self.dense_links(g, q, &capitalised, &names, qv);
        let terms = {
            let t = self.bm25.terms(q)?;
            let idf = self.bm25.idf(searcher, &t)?;
            let idf: HashMap<String, f64> = t.into_iter().zip(idf).collect();
            let total = idf.values().sum();
            Terms { idf, total }
        };
        let groups = name_groups(q, &names);
        let facts = if p.facts > 0 { self.match_facts(g, &names, &groups, &near, &prior, &terms, qv)? } else { vec![] };

        // the restart vector: entities (names, fact ends), then passages (the prior)
        let mut ent_reset: HashMap<&str, f64> = HashMap::default();
        let mut name_shares: Vec<(&str, f64)> = Vec::new();
        // the linked names, then those linked by their embeddings (weighted by how near)
        // a name the question writes a word of with a capital: proper, not a concept
        let proper = |id: &str| crate::normalize::words(id).any(|w| capitalised.contains(w));
        let name_weight = |n: &str| if !proper(n) && names.iter().any(|m| proper(m)) { p.name_weight * p.concept_weight } else { p.name_weight };
        let linked = names.iter().map(|n| (n, name_weight(n), 1.0)).chain(near.iter().map(|(id, w)| (id, p.entity_dense * w, *w)));
        for (n, weight, sure) in linked {
            if let Some(e) = g.entity(n) {
                // a name made of common words ("film", "place of birth") says little
                let share = if terms.total > 0.0 { self.bm25.terms(e.name())?.iter().filter_map(|w| terms.idf.get(w)).sum::<f64>() / terms.total } else { 1.0 };
                if share > 0.0 && weight > 0.0 {
                    *ent_reset.entry(e.id()).or_default() += weight * share / e.df().max(1) as f64;
                    name_shares.push((e.id(), sure * share));
                }
            }
        }
        let best_fact = facts.iter().map(|(_, x)| *x).fold(0.0f64, f64::max);
        for ((s, _, o), score) in &facts {
            let score = score * if best_fact > 0.0 { (score / best_fact).powf(p.fact_sharpness) } else { 1.0 };
            for end in [s, o] {
                if !p.fact_both_ends && names.iter().any(|n| n == end) {
                    continue;
                }
                if let Some(e) = g.entity(end) {
                    *ent_reset.entry(e.id()).or_default() += p.fact_weight * score / e.df().max(1) as f64;
                }
            }
        }
        // the entities the GLM scored best restart the walk too, each by its probability
        if p.glm_seed > 0.0 {
            for (id, prob) in glm.unwrap_or_default() {
                if let Some(e) = g.entity(id) {
                    *ent_reset.entry(e.id()).or_default() += p.glm_seed * prob / e.df().max(1) as f64;
                }
            }
        }
        let mut walked_entities: HashMap<&str, f64> = HashMap::default();
        // each walked passage's mass over the best's, for `prior_boost` once the pages are chosen
        let mut walk_share: HashMap<String, f64> = HashMap::default();
        let mut scores: HashMap<String, f64> = if p.walk && !(ent_reset.is_empty() && prior.is_empty()) {
            let walked = walk(g, p, &ent_reset, &prior);
            walked_entities = walked.entities;
            let max_walk = walked.docs.values().fold(0.0f64, |a, b| a.max(*b));
            // the less of the question its linked names carry, the less the walk is trusted
            let named = name_shares.iter().map(|(_, x)| x).sum::<f64>().min(1.0);
            let mix = p.prior_mix + p.unnamed_mix * (1.0 - named / p.named_enough.max(1e-9)).max(0.0);
            let mut s: HashMap<String, f64> = prior.iter().map(|(d, x)| (d.clone(), mix * x)).collect();
            if max_walk > 0.0 {
                for (d, m) in walked.docs {
                    *s.entry(d.clone()).or_default() += m / max_walk;
                    walk_share.insert(d, m / max_walk);
                }
            }
            s
        } else {
            prior.clone()
        };
        let proper_shares: Vec<(&str, f64)> = name_shares.into_iter().filter(|(id, _)| proper(id)).collect();
        if p.name_pages > 0.0 && proper_shares.len() >= p.name_pages_min {
            for (d, bonus) in name_pages(g, &proper_shares, p, false) {
                *scores.entry(d.to_string()).or_default() += p.name_pages * bonus;
            }
        }
        if p.fact_pages > 0.0 && !facts.is_empty() {
            // the far ends of the matched facts (the bridges a question crosses) lead to their own
            // pages, each in proportion to its fact's score over the best
            let mut ends: HashMap<&str, f64> = HashMap::default();
            for ((s, _, o), score) in &facts {
                for end in [*s, *o] {
                    if !names.iter().any(|n| n == end) {
                        let e = ends.entry(end).or_default();
                        *e = e.max(*score);
                    }
                }
            }
            let ends: Vec<(&str, f64)> = ends.into_iter().collect();
            for (d, bonus) in name_pages(g, &ends, p, true) {
                *scores.entry(d.to_string()).or_default() += p.fact_pages * bonus;
            }
        }
        if p.titled_pages > 0.0 && groups.len() >= 2 {
            for d in titled_in(g, q, &capitalised, &scores, 10, 1) {
                if let Some(s) = scores.get_mut(d) {
                    *s += p.titled_pages;
                }
            }
        }
        if p.hop_pages > 0.0 && groups.len() == 1 {
            // the page asked from keeps its place above the pages it leads to, and of those only
            // the best `hop_pages_k` rise: a question of three hops still needs its third page
            // before the rest of the second's neighbours
            let (anchor, hops) = hop_pages(g, q, &capitalised, &names, &proper_shares, &scores, p);
            // how near the question is to what the anchor page says of each entity it names
            let mut said: HashMap<&str, f64> = HashMap::default();
            if let (true, Some(f), Some(qv), Some(a)) = (p.hop_fact > 0.0, &self.facts, qv, anchor.and_then(|a| g.doc(a))) {
                let ts: Vec<(&str, &str, &str)> = a.triples().collect();
                for (t, c) in ts.iter().zip(f.cosines(ts.iter().copied(), qv)) {
                    let x = p.above_floor(c);
                    for end in [t.0, t.2] {
                        let e = said.entry(end).or_default();
                        *e = e.max(x);
                    }
                }
            }
            let score = |d: &str| scores.get(d).copied().unwrap_or(0.0);
            let mut keyed: Vec<((&str, &str), f64)> = hops.into_iter().filter(|(d, _)| score(d) > 0.0).map(|(d, e)| ((d, e), score(d) + p.hop_fact * said.get(e).copied().unwrap_or(0.0))).collect();
            keyed.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            let mut risen: Vec<&str> = Vec::new();
            for ((d, _), _) in keyed {
                if risen.len() < p.hop_pages_k && !risen.contains(&d) {
                    risen.push(d);
                }
            }
            for &d in anchor.iter().chain(&risen) {
                if let Some(s) = scores.get_mut(d) {
                    *s += p.hop_pages;
                }
            }
            // ... even when a page it leads to had more of the walk's mass (`hop_pages` never
            // gives the anchor as one of its own hops)
            if let Some(a) = anchor {
                let over = risen.iter().filter_map(|&d| scores.get(d).copied()).fold(f64::NEG_INFINITY, f64::max);
                if let Some(s) = scores.get_mut(a).filter(|s| **s <= over) {
                    *s = over + 1e-9;
                }
            }
        }
        if p.prior_boost > 0.0 {
            // once the walk chose the named, fact and hop pages: each walked passage keeps
            // (1 + b prior) / (1 + b best prior) of its mass, so those that also say what is
            // asked stay above the others the walk reached, and none climbs over a page those
            // gave their bonus to
            let best = prior.values().fold(0.0f64, |a, b| a.max(*b));
            for (d, w) in &walk_share {
                if let Some(s) = scores.get_mut(d) {
                    let x = prior.get(d).copied().unwrap_or(0.0);
                    *s -= w * (1.0 - (1.0 + p.prior_boost * x) / (1.0 + p.prior_boost * best));
                }
            }
        }
        let mut ranked: Vec<(String, f64)> = scores.into_iter().filter(|(d, _)| g.doc(d).is_some() || prior.contains_key(d)).collect();
        let by_score = |a: &(String, f64), b: &(String, f64)| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0));
        ranked.sort_by(by_score);
        let glm_ranked: Option<Vec<String>> = glm.filter(|_| p.fuse_glm > 0.0).map(|top| rank_documents(g, top, k.max(p.glm_depth)).into_iter().map(|d| d.id).collect());
        if p.fuse_bm25 > 0.0 || p.fuse_dense > 0.0 || glm_ranked.is_some() {
            let mut fused: HashMap<String, f64> = HashMap::default();
            let lists: [(f64, Vec<&String>); 4] = [
                (1.0, ranked.iter().map(|(d, _)| d).collect()),
                (p.fuse_bm25, bm25_ranked.iter().collect()),
                (p.fuse_dense, dense_ranked.iter().collect()),
                (p.fuse_glm, glm_ranked.iter().flatten().collect()),
            ];
            for (w, list) in lists {
                if w > 0.0 {
                    for (r, d) in list.into_iter().enumerate() {
                        *fused.entry(d.clone()).or_default() += w / (p.fuse_k + r as f64 + 1.0);
                    }
                }
            }
            ranked = fused.into_iter().collect();
            ranked.sort_by(by_score);
        }
        ranked.truncate(k);
        let documents: Vec<ScoredDocument> = ranked
            .into_iter()
            .map(|(id, score)| {
                let title = g.doc(&id).map(|d| d.title().to_string()).unwrap_or_default();
                ScoredDocument { id, title, score }
            })
            .collect();
        // what the question asks about, besides its names: its rarer words ("born", "river")
        let name_terms: HashSet<String> = names.iter().map(|n| self.bm25.terms(n)).collect::<Result<Vec<_>, _>>()?.into_iter().flatten().collect();
        let asks: HashSet<&str> = terms.idf.iter().filter(|(t, idf)| **idf >= ASKED_IDF && !name_terms.contains(*t)).map(|(t, _)| t.as_str()).collect();
        let stated = |rel: &str| self.bm25.terms(rel).map(|ts| ts.iter().any(|t| asks.contains(t.as_str()))).unwrap_or(false);
        let triples = evidence(g, &documents, &facts, &stated);
        let mut seeds: Vec<String> = names.iter().chain(near.iter().map(|(id, _)| id)).map(|n| display_name(g, n)).collect();
        for ((s, _, o), _) in &facts {
            for end in [s, o] {
                let n = display_name(g, end);
                if !seeds.contains(&n) {
                    seeds.push(n);
                }
            }
        }
        // without a walk, the restart weights are the entities' scores
        let entities = super::rank::subgraph_entities(&seeds, &triples, |id| walked_entities.get(id).or_else(|| ent_reset.get(id)).copied().unwrap_or(0.0));
        Ok(Retrieved { seeds, documents, triples, entities, checkpoint: None })
    }

    /// The entities linked by their names' embeddings, besides `names`: for each word the
    /// question writes with a capital (any content word when it writes none) outside its linked
    /// names of two words or more, among the entity names holding it (at most `max_df` of them)
    /// the one whose vector is nearest the question's, when its cosine is above the floor.
    /// Each with the part of its cosine above the floor, scaled to [0, 1]; the best
    /// `entity_dense_k`.
    fn dense_links(&self, g: &GraphState, q: &str, capitalised: &HashSet<String>, names: &[String], qv: Option<&[f32]>) -> Vec<(String, f64)> {
        let p = &self.params;
        let (Some(f), Some(qv)) = (&self.facts, qv) else { return vec![] };
        if p.entity_dense <= 0.0 || p.entity_dense_k == 0 {
            return vec![];
        }
        // a word inside a linked name of two words or more is that name's; one linked alone
        // ("Summers") may be a longer name cut short ("Andy Summers")
        let covered: HashSet<&str> = names.iter().filter(|n| crate::normalize::words(n).nth(1).is_some()).flat_map(|n| crate::normalize::words(n)).collect();
        // a name is written with a capital; a question written without any may name anything
        let norm = normalize(q);
        let mut best: HashMap<&str, f64> = HashMap::default();
        let mut seen: HashSet<&str> = HashSet::default();
        for w in crate::normalize::words(&norm) {
            if covered.contains(w) || (!capitalised.is_empty() && !capitalised.contains(w)) || super::seeds::QUESTION_STOP.contains(&w) || !seen.insert(w) {
                continue;
            }
            let cands = g.entities_with_word(w);
            if cands.is_empty() || cands.len() > p.max_df {
                continue;
            }
            let top = cands
                .iter()
                .filter(|id| !names.iter().any(|n| n == *id))
                .filter_map(|id| f.entity_cosine(id, qv).map(|c| (*id, c as f64)))
                .max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.0.cmp(a.0)));
            if let Some((id, c)) = top.filter(|(_, c)| *c > p.entity_dense_floor) {
                let e = best.entry(id).or_default();
                *e = e.max(c);
            }
        }
        let span = (1.0 - p.entity_dense_floor).max(1e-9);
        let mut out: Vec<(String, f64)> = best
            .into_iter()
            .filter(|(id, _)| g.entity(id).is_some_and(|e| e.df() <= p.max_df))
            .map(|(id, c)| (id.to_string(), (c - p.entity_dense_floor) / span))
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        out.truncate(p.entity_dense_k);
        out
    }

    /// BM25 and dense candidates, each scaled to [0, 1] (BM25 by its best score, dense from its
    /// worst to its best candidate), weighted and summed.
    /// From an access view, only the passages the view holds (the indexes asked for
    /// [`super::VIEW_OVERFETCH`] times as many).
    fn prior(&self, g: &GraphState, searcher: &tantivy::Searcher, q: &str, qv: Option<&[f32]>) -> Result<Prior, RetrieveError> {
        let p = &self.params;
        let mut prior: HashMap<String, f64> = HashMap::default();
        let (mut bm25, mut dense) = (Vec::new(), Vec::new());
        let readable = |mut hits: Vec<ScoredDocument>| {
            super::view_hits(g, &mut hits, p.candidates);
            hits
        };
        let candidates = super::view_fetch(g, p.candidates);
        let scaled = |hits: &[ScoredDocument], zero_outside: bool| scaled(&hits.iter().map(|h| h.score).collect::<Vec<_>>(), p.prior_scale, zero_outside, p.candidates);
        if p.bm25 > 0.0 {
            let hits = readable(self.bm25.search(searcher, q, candidates)?);
            if hits.first().is_some_and(|h| h.score > 0.0) {
                for (h, x) in hits.iter().zip(scaled(&hits, true)) {
                    *prior.entry(h.id.clone()).or_default() += p.bm25 * x;
                }
                bm25 = hits.into_iter().map(|h| h.id).collect();
            }
        }
        if let (Some(d), Some(qv), true) = (&self.dense, qv, p.dense > 0.0) {
            let hits = readable(d.nearest(qv, candidates));
            for (h, x) in hits.iter().zip(scaled(&hits, false)) {
                *prior.entry(h.id.clone()).or_default() += p.dense * x;
            }
            dense = hits.into_iter().map(|h| h.id).collect();
        }
        Ok(Prior { scores: prior, bm25, dense })
    }

    /// The facts near the question's links, scored by the share of the question's IDF weight
    /// their words carry; the best `facts`, best first.
    fn match_facts<'g>(
        &self,
        g: &'g GraphState,
        names: &[String],
        groups: &[Vec<&str>],
        near: &[(String, f64)],
        prior: &HashMap<String, f64>,
        terms: &Terms,
        qv: Option<&[f32]>,
    ) -> Result<Vec<((&'g str, &'g str, &'g str), f64)>, RetrieveError> {
        let p = &self.params;
        let mut cands: HashSet<(&str, &str, &str)> = HashSet::default();
        for n in names.iter().chain(near.iter().map(|(id, _)| id)) {
            if g.entity(n).is_some_and(|e| e.df() <= p.max_df) {
                cands.extend(g.incident(n));
            }
        }
        // the facts about each named thing: its names' own triples and those of their own pages
        // (one group or none: nothing to balance, so nothing is collected)
        let mut about: Vec<HashSet<(&str, &str, &str)>> = Vec::new();
        if p.fact_per_name > 0 && groups.len() >= 2 {
            for group in groups {
                let mut set: HashSet<(&str, &str, &str)> = HashSet::default();
                for e in group.iter().filter_map(|n| g.entity(n)).filter(|e| e.df() <= p.max_df) {
                    set.extend(g.incident(e.id()));
                    for d in own_pages(g, e, p, false) {
                        set.extend(d.triples());
                    }
                }
                if !set.is_empty() {
                    about.push(set);
                }
            }
            if about.len() < 2 {
                about.clear(); // one thing asked about: the best facts overall are its
            }
            for set in &about {
                cands.extend(set.iter().copied());
            }
        }
        let mut best: Vec<(&String, f64)> = prior.iter().map(|(d, s)| (d, *s)).collect();
        best.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        for (d, _) in best.into_iter().take(p.fact_passages) {
            if let Some(doc) = g.doc(d) {
                cands.extend(doc.triples());
            }
        }
        if terms.total <= 0.0 {
            return Ok(vec![]);
        }
        // the question's terms each fact's words match, as a bit set over `asked`
        // what is asked about the linked names, not the names themselves: a fact does not
        // match "the husband of Marie Curie" by holding "Marie Curie"
        let mut named: HashSet<String> = HashSet::default();
        if p.fact_skip_names {
            for n in names {
                named.extend(self.bm25.terms(&display_name(g, n))?);
            }
        }
        let asked: Vec<(&String, f64)> = {
            let mut v: Vec<(&String, f64)> = terms.idf.iter().filter(|(w, _)| !named.contains(*w)).map(|(w, x)| (w, *x)).collect();
            v.sort_by(|a, b| a.0.cmp(b.0));
            v.truncate(64);
            v
        };
        let asked_total: f64 = asked.iter().map(|(_, x)| x).sum();
        if asked_total <= 0.0 {
            return Ok(vec![]);
        }
        let matched = |t: (&str, &str, &str)| -> Result<u64, RetrieveError> {
            let text = super::facts::fact_text(&display_name(g, t.0), t.1, &display_name(g, t.2));
            let words = self.bm25.terms(&text)?;
            Ok(asked.iter().enumerate().filter(|(_, (q, _))| words.iter().any(|w| same_word(q, w, p.fact_prefix))).fold(0u64, |m, (i, _)| m | 1 << i))
        };
        let carried = |m: u64| -> f64 { asked.iter().enumerate().filter(|(i, _)| m & (1 << i) != 0).map(|(_, (_, x))| x).sum::<f64>() / asked_total };
        // what each candidate's embedding says beyond the floor (none without vectors)
        let cands: Vec<(&str, &str, &str)> = cands.into_iter().collect();
        let near: Vec<f64> = match (&self.facts, qv) {
            (Some(f), Some(qv)) if p.fact_dense > 0.0 => {
                f.cosines(cands.iter().copied(), qv).into_iter().map(|c| p.above_floor(c)).collect()
            }
            _ => vec![0.0; cands.len()],
        };
        let near_of: HashMap<(&str, &str, &str), f64> = cands.iter().copied().zip(near).filter(|(_, x)| *x > 0.0).collect();
        let mut first: Vec<((&str, &str, &str), u64)> = Vec::with_capacity(cands.len());
        for t in cands {
            let m = matched(t)?;
            if m != 0 || near_of.contains_key(&t) {
                first.push((t, m));
            }
        }
        // a fact about what the question names outranks an equal one about a passage's entity
        let linked = |t: &(&str, &str, &str)| names.iter().any(|n| n == t.0 || n == t.2);
        let score = |t: &(&str, &str, &str), m: u64| {
            (carried(m) + p.fact_dense * near_of.get(t).copied().unwrap_or(0.0)) * if linked(t) { 1.0 + p.fact_link_bonus } else { 1.0 }
        };
        first.sort_by(|a, b| score(&b.0, b.1).total_cmp(&score(&a.0, a.1)).then_with(|| a.0.cmp(&b.0)));
        // each named thing's best facts, lifted so that its best scores as the best of all
        let mut lifted: HashMap<(&str, &str, &str), f64> = HashMap::default();
        if let Some(top) = first.first().map(|(t, m)| score(t, *m)) {
            for set in &about {
                let mine: Vec<&((&str, &str, &str), u64)> = first.iter().filter(|(t, _)| set.contains(t)).take(p.fact_per_name).collect();
                if let Some(lead) = mine.first().map(|(t, m)| score(t, *m)).filter(|x| *x > 0.0) {
                    for (t, m) in mine {
                        let x = lifted.entry(*t).or_default();
                        *x = x.max(score(t, *m) * top / lead);
                    }
                }
            }
        }
        let kept: HashSet<(&str, &str, &str)> = first.iter().take(p.facts).map(|(t, _)| *t).chain(lifted.keys().copied()).collect();
        first.retain(|(t, _)| kept.contains(t));
        // chains: a fact of a matched fact's far end that says more of the question than the
        // first did ("born in Warsaw", then "Warsaw lies on the Vistula" for the river question)
        let mut scored: Vec<((&str, &str, &str), f64)> = first.iter().map(|(t, m)| (*t, score(t, *m).max(lifted.get(t).copied().unwrap_or(0.0)))).collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        if p.fact_hops >= 2 {
            let firsts: HashSet<(&str, &str, &str)> = first.iter().map(|(t, _)| *t).collect();
            let mut seen: HashSet<(&str, &str, &str)> = HashSet::default();
            let mut chains: Vec<((&str, &str, &str), f64)> = Vec::new();
            for (t, m) in &first {
                for end in [t.0, t.2] {
                    if names.iter().any(|n| n == end) || g.document_frequency(end) > p.max_df {
                        continue;
                    }
                    for u in g.incident(end) {
                        if firsts.contains(&u) || !seen.insert(u) {
                            continue;
                        }
                        let mu = matched(u)?;
                        if mu & !m != 0 {
                            chains.push((u, p.chain_weight * carried(m | mu)));
                        }
                    }
                }
            }
            chains.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            chains.truncate(p.facts);
            scored.extend(chains);
            scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        }
        Ok(scored)
    }
}

/// Whether two analysed words match: equal, or one begins with the other and the shorter has at
/// least `prefix` characters (0: equal only).
fn same_word(a: &str, b: &str, prefix: usize) -> bool {
    if a == b {
        return true;
    }
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    prefix > 0 && short.chars().count() >= prefix && long.starts_with(short)
}

/// The question's links by name: the longest word n-grams that are entity ids, sorted (no
/// stop-list: a name of common words weighs little by its IDF share instead).
pub(super) fn link_names(g: &GraphState, question: &str, max_ngram: usize) -> Vec<String> {
    super::seeds::longest_names(g, question, max_ngram, |_| false)
}

/// The question's words written with a capital, past its first word (normalised): what names
/// a thing rather than a concept ("Phoolwari" against "the place of birth").
fn capitalised_words(q: &str) -> HashSet<String> {
    q.split_whitespace()
        .skip(1)
        .filter(|t| t.chars().find(|c| c.is_alphanumeric()).is_some_and(char::is_uppercase))
        .flat_map(|t| crate::normalize::words(&normalize(t)).map(str::to_string).collect::<Vec<_>>())
        .collect()
}

/// The question's linked names grouped by the run of capitalised words that holds them (past
/// the first word): "Playing It Wild or I'll Be Going Now" names two things, "Beatrice I,
/// Countess Of Burgundy" one, however many of its parts link. A name outside every run (all
/// lower-case) is in none.
fn name_groups<'n>(q: &str, names: &'n [String]) -> Vec<Vec<&'n str>> {
    let mut runs: Vec<HashSet<String>> = Vec::new();
    let mut open = false;
    for t in q.split_whitespace().skip(1) {
        let capital = t.chars().find(|c| c.is_alphanumeric()).is_some_and(|c| c.is_uppercase() || c.is_ascii_digit());
        if !capital {
            open = false;
            continue;
        }
        if !open {
            runs.push(HashSet::default());
            open = true;
        }
        let run = runs.last_mut().expect("a run is open");
        run.extend(crate::normalize::words(&normalize(t)).map(str::to_string));
    }
    let mut groups: Vec<Vec<&str>> = vec![Vec::new(); runs.len()];
    for n in names {
        if let Some(i) = runs.iter().position(|r| crate::normalize::words(n).all(|w| r.contains(w))) {
            groups[i].push(n.as_str());
        }
    }
    groups.retain(|g| !g.is_empty());
    groups
}

/// The live passages whose title is this entity (its own pages). With `variants`, an entity
/// without such a page has as its own the pages titled by its name and a qualifier in
/// parentheses ("James Young (director)" for "James Young"), the usual way to tell apart the
/// pages of things that share a name; failing those, the page titled by a shorter form of a
/// styled name (without its opening titles of rank or what follows its comma); failing those,
/// the pages whose text says their subject is also known by this name; failing those, with
/// `links`, the page of an entity resolution linked to it that the graph backs.
pub(super) fn own_pages<'g>(g: &'g GraphState, e: EntityView<'g>, p: &HybridParams, links: bool) -> Vec<DocView<'g>> {
    let docs = |e: EntityView<'g>| e.docs().filter_map(|d| g.doc(d));
    let exact = |e: EntityView<'g>| -> Vec<DocView<'g>> { docs(e).filter(|d| d.title_key() == e.id()).collect() };
    let own = exact(e);
    if !own.is_empty() || !p.page_variants || (p.concept_pages && concept(e)) {
        return own;
    }
    // titled by the name and a qualifier: the key goes on past the name, the title without its
    // qualifier is the name
    let extends_name = |key: &str| key.strip_prefix(e.id()).is_some_and(|rest| rest.starts_with(' '));
    let qualified_title = |d: &DocView<'g>| extends_name(d.title_key()) && unqualified(d.title()).is_some_and(|t| normalize(t) == e.id());
    let qualified: Vec<DocView<'g>> = docs(e).filter(qualified_title).collect();
    if !qualified.is_empty() {
        return qualified;
    }
    // titled so though the page writes the name otherwise: "David Bradley (director)", whose
    // text says "David Shedd Bradley", for the "David Bradley" a film's page names
    let titled: Vec<DocView<'g>> = crate::normalize::words(e.id())
        .map(|w| g.entities_with_word(w))
        .min_by_key(Vec::len)
        .unwrap_or_default()
        .into_iter()
        .filter(|id| extends_name(id))
        .filter_map(|id| g.entity(id))
        .flat_map(exact)
        .filter(qualified_title)
        .collect();
    if !titled.is_empty() {
        return titled;
    }
    // a styled name whose page is titled by a shorter form ("King George I of Greece")
    let shorter = shorter_forms(e.name()).into_iter().filter_map(|f| g.entity(&normalize(f))).map(exact).find(|pages| !pages.is_empty()).unwrap_or_default();
    if !shorter.is_empty() || !p.page_aliases {
        return shorter;
    }
    // an alias the page itself gives its subject ("Frederick I, Holy Roman Emperor": "also known
    // as Frederick Barbarossa")
    let aliased: Vec<DocView<'g>> = docs(e)
        .filter(|d| d.title_key() != e.id() && d.triples().any(|(s, r, o)| ((s, o) == (d.title_key(), e.id()) || (s, o) == (e.id(), d.title_key())) && is_alias_relation(r)))
        .collect();
    if !aliased.is_empty() || !p.page_links || !links {
        return aliased;
    }
    // the page of an entity resolution linked to this one, most confident first, when the graph
    // agrees: a name alone is no evidence ("Juan Carlos" / "Juan Carlos Real")
    let specific = |s: u32| g.entity_at(s).is_some_and(|n| n.neighbour_count() <= p.link_hub && n.id().chars().any(char::is_alphabetic));
    let near: HashSet<u32> = e.neighbour_slots().map(|(s, _)| s).filter(|&s| specific(s)).collect();
    g.synonyms(e.id())
        .into_iter()
        .filter(|&(_, c)| c >= p.link_confidence)
        .filter_map(|(f, _)| g.entity(f))
        .filter(|f| near.contains(&f.slot()) || f.neighbour_slots().any(|(s, _)| near.contains(&s)))
        .map(exact)
        .find(|pages| !pages.is_empty())
        .unwrap_or_default()
}

/// Whether the documents that mention an entity write it in lower case more often than with a
/// capital: a concept ("film", "husband"), not a named thing, whose name no page is titled by
/// with a qualifier ("Film (disambiguation)" is not where a fact ending in "film" leads). The
/// graph keeps the count as documents come and go ([`EntityView::written_lower_case`]).
pub(super) fn concept(e: EntityView<'_>) -> bool {
    e.written_lower_case()
}

/// The passages whose title is a named entity (its own pages), each with the name's share over
/// the best share (a name with several such pages splits it among them; a hub has none).
fn name_pages<'g>(g: &'g GraphState, shares: &[(&str, f64)], p: &HybridParams, links: bool) -> Vec<(&'g str, f64)> {
    let best = shares.iter().fold(0.0f64, |a, s| a.max(s.1));
    if best <= 0.0 {
        return vec![];
    }
    let mut out = Vec::new();
    for (id, share) in shares {
        let Some(e) = g.entity(id).filter(|e| e.df() <= p.max_df) else { continue };
        let own: Vec<&str> = own_pages(g, e, p, links).iter().map(|d| d.id()).collect();
        for d in &own {
            out.push((*d, share / best / own.len() as f64));
        }
    }
    out
}

/// The pages one hop from the question's own page: of the own pages of its proper names, the
/// one scored best (the page the question is asked from), then the own pages of the entities it
/// mentions, other than the question's linked names and hubs, and not itself.
fn hop_pages<'g>(g: &'g GraphState, q: &str, capitalised: &HashSet<String>, names: &[String], proper: &[(&str, f64)], scores: &HashMap<String, f64>, p: &HybridParams) -> (Option<&'g str>, Vec<(&'g str, &'g str)>) {
    let score = |d: &str| scores.get(d).copied().unwrap_or(0.0);
    let titled = if p.hop_titled { titled_in(g, q, capitalised, scores, 5, 2).into_iter().next() } else { None };
    let anchor = titled.or_else(|| name_pages(g, proper, p, false).into_iter().map(|(d, _)| d).max_by(|a, b| score(a).total_cmp(&score(b)).then_with(|| b.cmp(a))));
    let Some(anchor) = anchor.and_then(|d| g.doc(d)) else { return (None, vec![]) };
    let mut out: HashSet<(&str, &str)> = HashSet::default();
    for (id, _) in anchor.entities() {
        if names.iter().any(|n| n == id) {
            continue;
        }
        let Some(e) = g.entity(id).filter(|e| e.df() <= p.max_df) else { continue };
        out.extend(own_pages(g, e, p, false).into_iter().map(|d| (d.id(), id)).filter(|(d, _)| *d != anchor.id()));
    }
    (Some(anchor.id()), out.into_iter().collect())
}

/// Of the `n` best-scored pages, those whose whole title (of `min_words` words or more) the
/// question writes as a name (its first word with a capital: not the page "Place of birth" for
/// "the place of birth of X"), and that no other of the `n` shares (a book cut into chunks), the
/// longest title first; a possessive "'s" on a title's last word is allowed.
fn titled_in<'g>(g: &'g GraphState, q: &str, capitalised: &HashSet<String>, scores: &HashMap<String, f64>, n: usize, min_words: usize) -> Vec<&'g str> {
    let qn = normalize(q);
    let qw: Vec<&str> = crate::normalize::words(&qn).collect();
    // the n best without sorting every page the walk reached (the ranking sorts them later)
    let mut best: Vec<(&String, f64)> = scores.iter().map(|(d, x)| (d, *x)).collect();
    let by_score = |a: &(&String, f64), b: &(&String, f64)| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0));
    if best.len() > n {
        best.select_nth_unstable_by(n, by_score);
        best.truncate(n);
    }
    best.sort_by(by_score);
    let written = |tw: &[&str]| {
        qw.windows(tw.len()).any(|w| {
            w.iter().zip(tw).enumerate().all(|(i, (a, b))| a == b || (i + 1 == tw.len() && a.strip_suffix('s') == Some(b)))
        })
    };
    let top: Vec<DocView<'g>> = best.into_iter().take(n).filter_map(|(d, _)| g.doc(d)).collect();
    let shared = |d: &DocView<'g>| top.iter().filter(|o| o.title_key() == d.title_key()).count() > 1;
    let mut found: Vec<(&'g str, usize)> = top
        .iter()
        .filter(|d| !shared(d))
        .map(|d| (d.id(), crate::normalize::words(d.title_key()).collect::<Vec<_>>()))
        .filter(|(_, tw)| !tw.is_empty() && tw.len() >= min_words && capitalised.contains(tw[0]) && written(tw))
        .map(|(d, tw)| (d, tw.len()))
        .collect();
    // the longest first, then by score (a stable sort keeps the score order)
    found.sort_by(|a, b| b.1.cmp(&a.1));
    found.into_iter().map(|(d, _)| d).collect()
}

struct Walked<'g> {
    docs: HashMap<String, f64>,
    /// The walk's score of each entity it reached, by id.
    entities: HashMap<&'g str, f64>,
}

/// Personalized PageRank over entities and passages from the restart vector (entities:
/// `ent_reset`; passages: `passage_weight` times the prior; with `reset_absolute` both as they
/// are, normalised together, else each normalised to its share, 1 - passage_weight and
/// passage_weight; either takes it all when the other is empty). The walk's nodes are kept in
/// arrays indexed by the graph's slots, not in maps keyed by id: building the walk was most of a
/// query's time.
fn walk<'g>(g: &'g GraphState, p: &HybridParams, ent_reset: &HashMap<&'g str, f64>, prior: &HashMap<String, f64>) -> Walked<'g> {
    const NONE: u32 = u32::MAX;
    // nodes: entities first, then passages; `ent_node[slot]` is an entity's node
    let mut ent_node = vec![NONE; g.entity_slot_count()];
    let mut ents: Vec<EntityView<'g>> = Vec::new();
    let add_ent = |e: EntityView<'g>, ents: &mut Vec<EntityView<'g>>, ent_node: &mut Vec<u32>| -> bool {
        let slot = e.slot() as usize;
        if ent_node[slot] != NONE {
            return false;
        }
        ent_node[slot] = ents.len() as u32;
        ents.push(e);
        true
    };
    let mut seeds: Vec<&str> = ent_reset.keys().copied().collect();
    seeds.sort_unstable();
    let mut frontier = Vec::new();
    for s in &seeds {
        if let Some(e) = g.entity(s) {
            if add_ent(e, &mut ents, &mut ent_node) {
                frontier.push(e);
            }
        }
    }
    'hops: for _ in 0..p.hops {
        let mut next = Vec::new();
        for u in frontier {
            if u.df() > p.max_df {
                continue; // a hub's neighbours are everything
            }
            let mut nb: Vec<EntityView<'g>> = u.neighbour_slots().filter_map(|(v, _)| g.entity_at(v)).collect();
            if ents.len() + nb.len() > p.max_nodes {
                // which neighbours make the cut must not depend on the graph's slots
                nb.sort_unstable_by_key(|v| v.id());
            }
            for v in nb {
                if ents.len() >= p.max_nodes {
                    break 'hops;
                }
                if add_ent(v, &mut ents, &mut ent_node) {
                    next.push(v);
                }
            }
        }
        frontier = next;
    }
    // passages: the prior's, and those of the walk's non-hub entities
    let mut doc_node = vec![NONE; g.doc_slot_count()];
    let mut docs: Vec<DocView<'g>> = Vec::new();
    let add_doc = |d: DocView<'g>, docs: &mut Vec<DocView<'g>>, doc_node: &mut Vec<u32>| {
        let slot = d.slot() as usize;
        if doc_node[slot] == NONE {
            doc_node[slot] = docs.len() as u32;
            docs.push(d);
        }
    };
    let mut prior_ids: Vec<&String> = prior.keys().collect();
    prior_ids.sort_unstable();
    for d in prior_ids {
        if let Some(v) = g.doc(d) {
            add_doc(v, &mut docs, &mut doc_node);
        }
    }
    for i in 0..ents.len() {
        let e = ents[i];
        if e.df() > p.max_df {
            continue;
        }
        for &d in e.doc_slots() {
            add_doc(g.doc_at(d).expect("live doc"), &mut docs, &mut doc_node);
        }
    }
    // the prior's passages bring their entities in (no further hops)
    for d in &docs {
        for e in d.entity_slots() {
            if ents.len() >= 2 * p.max_nodes {
                break;
            }
            add_ent(g.entity_at(e).expect("live entity"), &mut ents, &mut ent_node);
        }
    }
    let ne = ents.len();
    let n = ne + docs.len();
    // edges (from, to, weight), both ways for a passage's
    let mut edges = entity_edges(&ents, &ent_node, ents.len());
    // a passage's edge to a concept it mentions (see `concept_edge`)
    let edge_weight: Vec<f64> = if p.concept_edge == 1.0 { vec![1.0; ne] } else { ents.iter().map(|e| if concept(*e) { p.concept_edge } else { 1.0 }).collect() };
    for (j, d) in docs.iter().enumerate() {
        let dn = (ne + j) as u32;
        let subject = g.entity(d.title_key()).map(|e| e.slot());
        let mut linked = false;
        for e in d.entity_slots() {
            let i = ent_node[e as usize];
            if i != NONE {
                let w = if Some(e) == subject { linked = true; p.title_weight } else { edge_weight[i as usize] };
                edges.push((i, dn, w));
                edges.push((dn, i, w));
            }
        }
        // the page of an entity its text never names as a subject the extractor found
        if !linked && p.title_weight != 1.0 {
            if let Some(i) = subject.map(|s| ent_node[s as usize]).filter(|i| *i != NONE) {
                edges.push((i, dn, p.title_weight));
                edges.push((dn, i, p.title_weight));
            }
        }
    }
    let mut restart = vec![0.0; n];
    let ent_total: f64 = ent_reset.values().sum();
    let in_walk = |d: &str| g.doc(d).is_some_and(|v| doc_node[v.slot() as usize] != NONE);
    let prior_total: f64 = prior.iter().filter(|(d, _)| in_walk(d)).map(|(_, s)| s).sum();
    let (ent_share, doc_share) = match (ent_total > 0.0, prior_total > 0.0 && p.passage_weight > 0.0) {
        (false, false) => return Walked { docs: HashMap::default(), entities: HashMap::default() },
        // each side as it is: the two shares are the sides' own totals over both
        (e, d) if p.reset_absolute => {
            let ent_abs = if e { ent_total } else { 0.0 };
            let doc_abs = if d { p.passage_weight * prior_total } else { 0.0 };
            (ent_abs / (ent_abs + doc_abs), doc_abs / (ent_abs + doc_abs))
        }
        (true, true) => (1.0 - p.passage_weight, p.passage_weight),
        (true, false) => (1.0, 0.0),
        (false, true) => (0.0, 1.0),
    };
    for (e, w) in ent_reset {
        if let Some(i) = g.entity(e).map(|v| ent_node[v.slot() as usize]).filter(|i| *i != NONE) {
            restart[i as usize] += ent_share * w / ent_total;
        }
    }
    for (d, s) in prior {
        if let Some(j) = g.doc(d).map(|v| doc_node[v.slot() as usize]).filter(|j| *j != NONE) {
            restart[ne + j as usize] += doc_share * s / prior_total;
        }
    }
    let rank = pagerank(&Csr::new(n, &edges), &restart, p.damping, p.iterations);
    Walked {
        docs: docs.iter().enumerate().filter(|(j, _)| rank[ne + j] > 0.0).map(|(j, d)| (d.id().to_string(), rank[ne + j])).collect(),
        entities: ents.iter().enumerate().filter(|(i, _)| rank[*i] > 0.0).map(|(i, e)| (e.id(), rank[i])).collect(),
    }
}

/// One signal's candidate scores, best first, scaled to [0, 1] as `scale` says, over a pool of
/// `pool` candidates. `zero_outside`: the signal scores 0 where it found nothing (BM25), so
/// when it found fewer than `pool`, the rest of the pool is at 0: its floor is 0 (a small
/// corpus, or a rare word, keeps every match). Under [`PriorScale::Best`] such a signal is
/// always scaled from 0.
/// A signal whose candidates all score alike gives each of them 1, when it found anything.
fn scaled(scores: &[f64], scale: PriorScale, zero_outside: bool, pool: usize) -> Vec<f64> {
    let (Some(&hi), Some(&lo)) = (scores.first(), scores.last()) else { return vec![] };
    let short = zero_outside && scores.len() < pool;
    let floor = match scale {
        PriorScale::Mean => scores.iter().sum::<f64>() / if short { pool } else { scores.len() } as f64,
        _ if short || (scale == PriorScale::Best && zero_outside) => 0.0,
        PriorScale::Best | PriorScale::Range => lo,
    };
    let span = hi - floor;
    if span.is_nan() || span <= 0.0 {
        return scores.iter().map(|_| if zero_outside && hi <= 0.0 { 0.0 } else { 1.0 }).collect();
    }
    scores.iter().map(|x| ((x - floor) / span).max(0.0)).collect()
}

/// The edges between the walk's entities `ents` (`ent_node`: a graph slot's node, or
/// `u32::MAX`), weighted by their triples. An entity with more than `hub_above` neighbours (a
/// hub the prior's passages brought in) is asked about each of `ents` instead of going through
/// all its neighbours: the same edges, in the order of `ents`.
pub(super) fn entity_edges(ents: &[EntityView<'_>], ent_node: &[u32], hub_above: usize) -> Vec<(u32, u32, f64)> {
    let mut edges = Vec::new();
    for (i, e) in ents.iter().enumerate() {
        if e.neighbour_count() > hub_above {
            for (j, v) in ents.iter().enumerate() {
                if let Some(c) = e.triples_with(v.slot()).filter(|_| j != i) {
                    edges.push((i as u32, j as u32, c as f64));
                }
            }
            continue;
        }
        for (v, c) in e.neighbour_slots() {
            let j = ent_node[v as usize];
            if j != u32::MAX && j as usize != i {
                edges.push((i as u32, j, c as f64));
            }
        }
    }
    edges
}

/// A walk's edges grouped by source, each weighted by its share of the source's out-weight.
struct Csr {
    /// Node u's edges are `to[start[u]..start[u + 1]]`.
    start: Vec<usize>,
    to: Vec<u32>,
    share: Vec<f64>,
}

impl Csr {
    fn new(n: usize, edges: &[(u32, u32, f64)]) -> Self {
        let mut start = vec![0usize; n + 1];
        let mut out = vec![0.0f64; n];
        for &(u, _, w) in edges {
            start[u as usize + 1] += 1;
            out[u as usize] += w;
        }
        for u in 0..n {
            start[u + 1] += start[u];
        }
        let mut fill = start.clone();
        let (mut to, mut share) = (vec![0u32; edges.len()], vec![0.0f64; edges.len()]);
        for &(u, v, w) in edges {
            let at = &mut fill[u as usize];
            to[*at] = v;
            share[*at] = if out[u as usize] > 0.0 { w / out[u as usize] } else { 0.0 };
            *at += 1;
        }
        Csr { start, to, share }
    }
    fn edges(&self, u: usize) -> (&[u32], &[f64]) {
        let r = self.start[u]..self.start[u + 1];
        (&self.to[r.clone()], &self.share[r])
    }
}

/// Power iteration; a node without edges (or whose edges weigh nothing) sends its mass back to
/// the restart vector.
fn pagerank(adj: &Csr, restart: &[f64], damping: f64, iterations: usize) -> Vec<f64> {
    let n = restart.len();
    let dangling_node: Vec<bool> = (0..n).map(|u| adj.edges(u).1.iter().all(|w| *w == 0.0)).collect();
    let mut rank = restart.to_vec();
    let mut next = vec![0.0; n];
    for _ in 0..iterations {
        next.iter_mut().for_each(|x| *x = 0.0);
        let mut dangling = 0.0;
        for u in 0..n {
            let ru = rank[u];
            if ru == 0.0 {
                continue;
            }
            if dangling_node[u] {
                dangling += ru;
                continue;
            }
            let m = damping * ru;
            let (to, share) = adj.edges(u);
            for (v, w) in to.iter().zip(share) {
                next[*v as usize] += m * w;
            }
        }
        let back = (1.0 - damping) + damping * dangling;
        let mut delta = 0.0;
        for i in 0..n {
            next[i] += back * restart[i];
            delta += (next[i] - rank[i]).abs();
        }
        std::mem::swap(&mut rank, &mut next);
        if delta < 1e-9 {
            break;
        }
    }
    rank
}

/// The matched facts that the returned passages support, then the triples between the
/// passages' entities that the facts reach, best first (at most 10).
/// The least idf of a question word that says what it asks (a word in most passages says
/// nothing: "was", "in").
const ASKED_IDF: f64 = 0.5;

/// The evidence returned with the documents: first the facts the best two documents state about
/// their own subject whose relation holds a word the question asks about beside its names (the
/// last hop's answer, "Pierre Curie | was a French physicist born in | Paris" for the husband's
/// birthplace, which the question's own facts do not reach), then the matched facts the
/// documents support, then the triples among the matched facts' ends.
fn evidence(g: &GraphState, docs: &[ScoredDocument], facts: &[((&str, &str, &str), f64)], stated: &dyn Fn(&str) -> bool) -> Vec<Triple> {
    let returned: HashSet<&str> = docs.iter().map(|d| d.id.as_str()).collect();
    let mut out: Vec<Triple> = Vec::new();
    for d in docs.iter().take(2).filter_map(|d| g.doc(&d.id)) {
        out.extend(d.triples().filter(|(s, r, _)| *s == d.title_key() && stated(r)).take(2).map(|t| shown_triple(g, t)));
    }
    let mut ends: BTreeMap<String, f64> = BTreeMap::new();
    for ((s, r, o), score) in facts {
        let supported = g.triple(s, r, o).is_some_and(|t| t.support().any(|d| returned.contains(d)));
        if supported {
            let t = shown_triple(g, (s, r, o));
            if !out.contains(&t) {
                out.push(t);
            }
        }
        for e in [s, o] {
            *ends.entry(e.to_string()).or_default() += score;
        }
    }
    let top: Vec<(String, f64)> = ends.into_iter().collect();
    for t in supporting_triples(g, docs, &top, 10) {
        if !out.contains(&t) {
            out.push(t);
        }
    }
    out.truncate(10);
    out
}

#[cfg(test)]
mod tests {
    use super::{capitalised_words, name_groups, pagerank, scaled, walk, Csr, HashMap, HybridParams, PriorScale};
    use crate::graph::{DocEntry, Dirty, GraphState};

    /// A document naming `ents`, with a triple from the first to each other.
    fn entry(ents: &[&str]) -> DocEntry {
        DocEntry {
            title: String::new(),
            entities: ents.iter().map(|e| (e.to_string(), e.to_string())).collect(),
            triples: ents[1..].iter().map(|e| (ents[0].to_string(), "met".to_string(), e.to_string())).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn signals_scaled_alike_let_the_sharper_one_decide() {
        // BM25 finds one passage far above the rest; dense ranks it second, a hair below
        // another, with every cosine close (MiniLM's usual spread)
        let bm25 = [10.0, 8.0, 7.8, 7.7, 7.6, 7.5];
        let dense = [0.62, 0.60, 0.58, 0.57, 0.56, 0.555];
        // passage a: BM25's first, dense's second; passage b: dense's first, BM25's second
        let fused = |scale: PriorScale| {
            let (b, d) = (scaled(&bm25, scale, true, 6), scaled(&dense, scale, false, 6));
            (b[0] + d[1], b[1] + d[0])
        };
        // BM25 from 0 and dense from its worst: BM25's lead is squeezed into [0.75, 1] while
        // dense's is stretched over [0, 1], and dense's first wins
        let (a, b) = fused(PriorScale::Best);
        assert!(b > a, "{a} {b}");
        // both from worst to best, or both from their mean: BM25's clear lead decides
        for scale in [PriorScale::Range, PriorScale::Mean] {
            let (a, b) = fused(scale);
            assert!(a > b, "{scale:?}: {a} {b}");
        }
        // from the mean: below it a candidate gets nothing, the best gets 1
        let m = scaled(&bm25, PriorScale::Mean, true, 6);
        assert_eq!(m[0], 1.0);
        assert!(m[1] == 0.0 && m[5] == 0.0, "{m:?}");
        assert!(scaled(&dense, PriorScale::Mean, false, 6)[1] > 0.0);
        // BM25 finding fewer than the pool: the rest of the pool scores 0, and every match
        // keeps some of its score (from 0 under range; from a mean with the zeros in it)
        let few = [3.0, 2.0, 1.0];
        assert_eq!(scaled(&few, PriorScale::Range, true, 100), vec![1.0, 2.0 / 3.0, 1.0 / 3.0]);
        assert!(scaled(&few, PriorScale::Mean, true, 100).iter().all(|x| *x > 0.0));
        assert_eq!(scaled(&few, PriorScale::Range, true, 3)[2], 0.0);
        // dense always has a score: its worst candidate is its floor
        assert_eq!(scaled(&[0.6, 0.5, 0.4], PriorScale::Range, false, 100)[2], 0.0);
        // a signal whose candidates all score alike counts each in full; BM25 matching nothing
        // counts none
        assert_eq!(scaled(&[0.5, 0.5], PriorScale::Mean, false, 2), vec![1.0, 1.0]);
        assert_eq!(scaled(&[0.0, 0.0], PriorScale::Best, true, 2), vec![0.0, 0.0]);
        assert!(scaled(&[], PriorScale::Mean, true, 2).is_empty());
        // read by name, with a clear error
        assert_eq!("range".parse::<PriorScale>(), Ok(PriorScale::Range));
        let mut p = HybridParams::default();
        assert_eq!(p.set("prior_scale", "2"), Err("prior_scale: best, range or mean, not 2".to_string()));
        p.set("prior_scale", "best").unwrap();
        assert_eq!(p.prior_scale, PriorScale::Best);
    }

    #[test]
    fn a_seed_in_many_passages_leads_the_walk_only_when_each_side_is_normalised_apart() {
        // a story's hero in ten chunks; the chunk BM25 and dense rank first names only a rare
        // thing; thirty more chunks the prior found less sure of
        let mut g = GraphState::new();
        let mut dirty = Dirty::default();
        for i in 0..10 {
            g.apply(&format!("h{i}"), Some(&entry(&["hero", &format!("place{i}")])), &mut dirty);
        }
        g.apply("t", Some(&entry(&["cellar", "lamp"])), &mut dirty);
        let mut prior: HashMap<String, f64> = HashMap::default();
        prior.insert("t".into(), 2.0);
        for i in 0..30 {
            g.apply(&format!("f{i}"), Some(&entry(&[&format!("thing{i}")])), &mut dirty);
            prior.insert(format!("f{i}"), 0.5);
        }
        // the hero seeds the walk: its weight (1) times the question's share its name carries
        // (0.3) over its document frequency (10)
        let seeds: HashMap<&str, f64> = [("hero", 0.3 / 10.0)].into_iter().collect();
        let top = |absolute: bool| {
            let p = HybridParams { reset_absolute: absolute, ..HybridParams::default() };
            let w = walk(&g, &p, &seeds, &prior);
            let mut docs: Vec<(String, f64)> = w.docs.into_iter().collect();
            docs.sort_by(|a, b| b.1.total_cmp(&a.1));
            docs
        };
        // as they are, the hero's 0.03 is small beside the passages' 0.05 x 17 of prior
        let on = top(true);
        assert_eq!(on[0].0, "t", "{:?}", &on[..3]);
        // each side to its share, the hero gets 95% of the restart and his chunks lead
        let off = top(false);
        assert!(off[0].0.starts_with('h'), "{:?}", &off[..3]);
        assert!(off.iter().position(|(d, _)| d == "t").unwrap() >= 10, "below all ten of the hero's chunks: {off:?}");
    }

    #[test]
    fn pagerank_over_the_csr_keeps_the_mass_and_returns_a_dead_end_to_the_restart() {
        // 0 -> 1 (weight 3), 0 -> 2 (weight 1), 1 -> 0; 2 has no edges; 3's only edge weighs 0
        let edges = [(0, 1, 3.0), (0, 2, 1.0), (1, 0, 1.0), (3, 0, 0.0)];
        let csr = Csr::new(4, &edges);
        assert_eq!(csr.edges(0), (&[1u32, 2][..], &[0.75, 0.25][..]));
        assert_eq!(csr.edges(2).0.len(), 0);
        let rank = pagerank(&csr, &[1.0, 0.0, 0.0, 0.0], 0.5, 100);
        assert!((rank.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{rank:?}");
        assert!(rank[1] > rank[2] && rank[2] > 0.0 && rank[3] == 0.0, "{rank:?}");
    }

    #[test]
    fn capitalised_words_skip_the_first_word_and_lower_case_concepts() {
        let w = capitalised_words("What is the place of birth of Lisbeth Palme's husband, or of Gare De La Roche-Sur-Yon?");
        let mut got: Vec<&str> = w.iter().map(String::as_str).collect();
        got.sort();
        assert_eq!(got, ["de", "gare", "la", "lisbeth", "palmes", "roche", "sur", "yon"]);
        assert!(capitalised_words("Phoolwari or Aas Ka Panchhi?").contains("aas"));
        assert!(!capitalised_words("Phoolwari or Aas Ka Panchhi?").contains("phoolwari"), "the first word is capitalised anyway");
    }

    #[test]
    fn linked_names_group_by_the_capitalised_run_that_writes_them() {
        let names: Vec<String> = ["born", "ill be going now", "playing it wild", "wild"].iter().map(|s| s.to_string()).collect();
        let got = name_groups("Which film has the director who was born later, Playing It Wild or I'll Be Going Now?", &names);
        assert_eq!(got, vec![vec!["playing it wild", "wild"], vec!["ill be going now"]], "two things asked about; 'born' is in neither");
        // one name in parts, titles and qualifiers included, is one thing
        let names: Vec<String> = ["beatrice i", "countess", "burgundys", "husband"].iter().map(|s| s.to_string()).collect();
        assert_eq!(name_groups("What nationality is Beatrice I, Countess Of Burgundy's husband?", &names), vec![vec!["beatrice i", "countess", "burgundys"]]);
        let names: Vec<String> = ["film", "get carter 2000 film"].iter().map(|s| s.to_string()).collect();
        assert_eq!(name_groups("Which country the director of film Get Carter (2000 Film) is from?", &names).len(), 1);
        // a question in lower case names nothing this way
        let names: Vec<String> = vec!["marie curie".to_string()];
        assert!(name_groups("was marie curie older than pierre curie?", &names).is_empty());
    }
}
